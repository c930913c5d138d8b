//! Drives scenarios: for each one, the agents (in the lab's VMs or on real hosts)
//! through the agent protocol, the wire's recording (the lab switch, or a live
//! capture), then the judge; and the lab kept healthy between scenarios.
//!
//! Owns: the run plan, the agent links, the run loop.
//! Imports: scenario, agent's protocol, the agent's key, the verbs' QP kinds,
//! caps and access flags, judge, results, net, the lab crate. Never
//! the CLI or the renderers: results go back to the caller as they come.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use lab::image::Release;

use crate::judge::{self, Timeline};
use crate::results::profile::Profile;
use crate::results::{Iba, Laps, Phase, Report, ScenarioResult, Status};
use crate::scenario::model::Scenario;

#[cfg(test)]
mod agent_dos_tests;
mod at_agents;
pub(crate) mod budget;
mod link;
mod resolve;
mod runner;

pub(crate) use crate::results::Evidence;
pub(crate) use runner::{AgentPool, Endpoints, LabRef, RemoteAgents, Slot};

/// How a scenario's wire is recorded.
#[derive(Debug, Clone)]
pub(crate) enum WireSource {
    /// The lab's switch records it (lab endpoints).
    Switch,
    /// A live capture on this host's interface, with a libpcap filter.
    Live { iface: String, filter: String },
    /// A capture the user made while the (single) scenario ran.
    File(PathBuf),
    /// Each endpoint's agent captures its own host's, and the two captures are
    /// merged by frame identity (`--capture-at-agents` with no switch).
    Agents,
    /// Nothing records it: wire expectations fail, saying so.
    None,
}

/// What `roce run` and `roce suite` settled before anything runs: where the
/// endpoints are, how the wire is recorded, where captures go, which profile holds.
pub(crate) struct RunPlan {
    pub endpoints: Endpoints,
    pub wire: WireSource,
    /// The agents capture their hosts' wire too (`--capture-at-agents`): the
    /// wire judged without a switch ([`WireSource::Agents`]), kept beside the
    /// switch's recording with one.
    pub at_agents: bool,
    /// Each scenario's capture is kept here.
    pub out_dir: PathBuf,
    pub profile: Option<Profile>,
    /// How many scenarios run side by side on the lab (1: one after the other).
    pub jobs: usize,
    /// Scenarios not to run, by name, and why: they crash this setup (the
    /// profile's `crashes`). Each is reported as skipped with that reason.
    pub crashes: BTreeMap<String, String>,
    /// Where each scenario's wire snapshot is kept and compared (`--snapshots`).
    pub snapshots: Option<crate::results::snapshots::Store>,
}

/// Lab endpoints: the lab `name` under `root`, booted when it is not up.
pub(crate) fn lab_endpoints(
    root: Option<PathBuf>,
    name: Option<String>,
    image: Option<Release>,
) -> Result<Endpoints> {
    let paths = lab::lab_paths(root, name, image.unwrap_or_default())?;
    // Without --image, a lab that is up (or defined) is run in as it is: its
    // name says which lab, its definition which image.
    let image = match image {
        Some(i) => i,
        None => lab::Definition::remembered(&paths)?.map(|d| d.image).unwrap_or_default(),
    };
    let lab = LabRef { paths, image };
    if !lab.paths.is_running() {
        boot_lab(&lab, &format!("lab `{}` is not up: booting it (it stays up for later runs; `roce lab down` stops it)", lab.paths.name))?;
    } else {
        // The lab that is up must be the image asked for: `lab::up` says so if not.
        boot_lab(&lab, "")?;
    }
    Ok(Endpoints::Lab(lab))
}

/// Boots the lab (saying `why` first, when there is something to say) or finds it
/// up; one that is up but broken is restarted as it was defined, and that is said
/// whatever `why` is.
fn boot_lab(lab: &LabRef, why: &str) -> Result<()> {
    let p = lab::Progress::new(false);
    if !why.is_empty() {
        p.say(why);
    }
    let up = lab::up(&lab.paths, &lab::UpOpts::for_runs(lab.image), &p)?;
    if !up.already_up {
        p.say(&up.describe(&lab.paths));
    }
    Ok(())
}

/// Brings back a lab whose VM died or hung (or that went down), so one broken
/// VM fails one scenario, not the rest, and with the standing rules it was
/// given. Every agent kept from earlier scenarios dies with it.
fn heal_lab(lab: &LabRef, why: &str) -> Result<()> {
    let p = lab::Progress::new(false);
    let up = lab::heal(&lab.paths, &lab::UpOpts::for_runs(lab.image), why, &p)
        .with_context(|| format!("bringing the broken lab `{}` back", lab.paths.name))?;
    p.say(&up.describe(&lab.paths));
    Ok(())
}

/// Brings the lab of `eps` back when it is not ready (a VM died, hung, or its
/// NIC stopped): `Some(why it was not)` when it had to. The agents idle in
/// `pool` are stopped first (each holds a command open in its VM, which the
/// stopping lab would wait for). Real hosts: nothing to do.
pub(crate) fn heal_if_broken(eps: &Endpoints, pool: &AgentPool) -> Result<Option<String>> {
    let Endpoints::Lab(lab) = eps else { return Ok(None) };
    match lab::usable(&lab.paths) {
        Ok(()) => Ok(None),
        Err(why) => {
            pool.clear();
            heal_lab(lab, &why)?;
            Ok(Some(why))
        }
    }
}

/// The capture file of a scenario: `<out>/<file stem>.pcapng`, unique.
pub(crate) fn capture_path(out: &Path, file: &Path, taken: &mut BTreeMap<PathBuf, ()>) -> PathBuf {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".into());
    let mut p = out.join(format!("{stem}.pcapng"));
    let mut i = 2;
    while taken.contains_key(&p) {
        p = out.join(format!("{stem}-{i}.pcapng"));
        i += 1;
    }
    taken.insert(p.clone(), ());
    p
}

/// Runs one loaded scenario in `slot`, its wire recorded to `capture` by the
/// switch when there is one, and captured at the agents when `at_agents` (to
/// `capture` without a switch, beside it as `<stem>.agents.pcapng` with one):
/// the outcome and how long it took.
pub(crate) fn run_one(
    sc: &Scenario,
    eps: &Endpoints,
    (capture, at_agents): (&Path, bool),
    pool: &AgentPool,
    slot: Slot,
) -> (Evidence, f64) {
    let t = Instant::now();
    let switched = eps.switched();
    let agents = at_agents.then(|| match switched {
        true => capture.with_extension("agents.pcapng"),
        false => capture.to_path_buf(),
    });
    let wires = runner::Wires { switch: switched.then(|| capture.to_path_buf()), agents };
    let o = runner::execute(sc, eps, wires, pool, slot);
    (o, t.elapsed().as_secs_f64())
}

/// What a run of several scenarios produced.
pub(crate) struct RunResults {
    pub report: Report,
    /// Each scenario's decoded wire, in report order (for renderers that draw it).
    pub wires: Vec<Option<Timeline>>,
    /// Scenarios the profile does not know (nothing compared for them).
    pub not_in_profile: Vec<String>,
}

/// One scenario carried out (not yet judged), as a worker hands it on.
struct Executed {
    outcome: Evidence,
    secs: f64,
}

/// Carries out one scenario in `slot`, its wire recorded as the plan says.
fn carry_out(
    plan: &RunPlan,
    sc: &Scenario,
    cap: &Path,
    pool: &AgentPool,
    slot: Slot,
) -> Result<Executed> {
    if let Some(why) = plan.crashes.get(&sc.name) {
        let skipped = format!("it crashes this setup, says the profile: {why} (run it alone with --no-profile to see)");
        return Ok(Executed {
            outcome: Evidence { skipped: Some(skipped), ..Default::default() },
            secs: 0.0,
        });
    }
    let rec = match &plan.wire {
        WireSource::Live { iface, filter } => {
            let opts = crate::net::live::LiveOptions {
                iface: iface.clone(),
                filter: filter.clone(),
                snaplen: crate::net::live::whole_frames(iface),
                ..Default::default()
            };
            let writer = concat!("roce ", env!("CARGO_PKG_VERSION"));
            Some(
                crate::net::live::FileCapture::start(opts, cap, writer, u64::MAX)
                    .map_err(|e| anyhow!("capturing on {iface}: {e}"))?,
            )
        }
        _ => None,
    };
    let consoles = KernelSays::watch(&plan.endpoints);
    let (mut o, secs) = run_one(sc, &plan.endpoints, (cap, plan.at_agents), pool, slot);
    if let Some(e) = &mut o.error {
        consoles.add_to(e);
    }
    if let WireSource::File(p) = &plan.wire {
        o.capture = Some(p.clone());
        o.wire_from = Some(format!("the capture given ({})", p.display()));
    }
    if let (Some(r), WireSource::Live { iface, .. }) = (rec, &plan.wire) {
        match r.finish() {
            Ok(w) => {
                o.capture = Some(cap.to_path_buf());
                o.wire_from = Some(format!("a live capture on {iface}, on this host"));
                if w.dropped > 0 {
                    o.error.get_or_insert(format!(
                        "the wire's capture is incomplete: the capture on {iface} dropped {} frames",
                        w.dropped
                    ));
                }
            }
            Err(e) => {
                o.error.get_or_insert(format!("the capture on {iface}: {e}"));
            }
        }
    }
    Ok(Executed { outcome: o, secs })
}

/// The lab VMs' consoles, read from where they were when a scenario began: a
/// scenario stopped by a VM that went away says what its kernel said (the BUG
/// line, where it happened), not only that the VM is gone.
struct KernelSays(Option<lab::state::KernelWatch>);

impl KernelSays {
    fn watch(eps: &Endpoints) -> KernelSays {
        KernelSays(match eps {
            Endpoints::Lab(l) => Some(lab::state::KernelWatch::from_end(&l.paths)),
            Endpoints::Remote(_) => None,
        })
    }

    /// Adds to a run's error the first kernel report on each VM's console since
    /// the watch began: `VM b's kernel: BUG: … at __rxe_put+0xf/0x50 [rdma_rxe]`.
    fn add_to(mut self, error: &mut String) {
        let Some(watch) = &mut self.0 else { return };
        let mut said = [false; 2];
        for k in watch.reports() {
            if !std::mem::replace(&mut said[k.vm.index()], true) {
                error.push_str(&format!("\nVM {}'s kernel: {}", k.vm.name(), k.line));
            }
        }
    }
}

/// Judges what a scenario did: its result and its decoded wire.
/// The third part says that the profile does not know the scenario.
fn judge_one(
    plan: &RunPlan,
    file: &Path,
    sc: &Scenario,
    ex: Executed,
) -> (ScenarioResult, Option<Timeline>, bool) {
    let Executed { outcome: mut o, secs } = ex;
    // Reading the capture is judging's time, as is the streams' pace.
    let mut laps = Laps::start();
    let wire = judge::wire_of(sc, &o);
    if let Ok(t) = &wire {
        for (id, on, w) in judge::pace::stream_wires(sc, &o, t) {
            if let Some(run) = o.streams.iter_mut().find(|r| r.report.id == id && r.on == on) {
                run.wire = Some(w);
            }
        }
    }
    let faults: Vec<String> = sc.faults.iter().map(|f| f.describe()).collect();
    let base = ScenarioResult {
        name: sc.name.clone(),
        file: file.display().to_string(),
        spec: sc.spec.clone(),
        pass: false,
        status: Status::Failed,
        iba_said: None,
        skip_reason: None,
        error: o.error.clone(),
        verdicts: Vec::new(),
        capture: o.capture.as_ref().map(|p| p.display().to_string()),
        wire_from: o.wire_from.clone(),
        agents_capture: o.agents_capture.clone(),
        duration_s: secs,
        agent_logs: o.agent_logs.clone(),
        endpoints: o.endpoints.clone(),
        connections: o.connections.clone(),
        faults,
        observations: Default::default(),
        timings: o.timings.clone(),
        streams: o.streams.clone(),
        counters: judge::counters::reports(&o, wire.as_ref().ok()),
        events: o
            .events
            .iter()
            .filter(|(_, e)| !e.is_empty())
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect(),
        wire_snapshot: None,
        wire_kept: None,
    };
    if let Some(why) = &o.skipped {
        return (
            ScenarioResult { status: Status::Skipped, skip_reason: Some(why.clone()), ..base },
            None,
            false,
        );
    }
    let (mut verdicts, mut observations) = judge::judge(sc, &o, &wire);
    observations.extend(judge::counters::observations(&base.counters));
    let mut unknown = false;
    if let Some(p) = &plan.profile {
        let judged = |k: &str| judge::counters::judged(k, &base.counters);
        match judge::profile::verdicts(p, &sc.name, &observations, judged) {
            Some(v) => verdicts.extend(v),
            None => unknown = true,
        }
    }
    // Written only for a store to keep: a run without one does not pay for it.
    let (wire_snapshot, wire_kept) = match (&plan.snapshots, &wire) {
        (Some(store), Ok(t)) => {
            let now = judge::snapshot::normal(sc, &o, t, store.fields);
            let (v, kept) = store.check(file, &sc.name, &now);
            verdicts.push(v);
            (Some(now), kept)
        }
        _ => (None, None),
    };
    let pass = o.error.is_none() && verdicts.iter().all(|v| v.pass);
    let status = if pass { Status::Passed } else { Status::Failed };
    let iba_said = Iba::of(status, &verdicts);
    let mut r = ScenarioResult {
        pass,
        status,
        iba_said,
        verdicts,
        observations,
        wire_snapshot,
        wire_kept,
        ..base
    };
    laps.lap(&mut r.timings, Phase::Judge);
    (r, wire.ok(), unknown)
}

/// What the workers of one run share: the next scenario to take, and the lab.
///
/// Scenarios that share the switch hold `wire` for reading while they run; one
/// that needs it alone (see [`Scenario::needs_the_wire_alone`]), or a worker
/// bringing back a broken lab, holds it for writing, so it waits for the running
/// ones to end and holds the next ones back.
struct Shared<'p> {
    /// The scenarios' indices in the order they are taken, and how many are.
    order: Vec<usize>,
    next: Mutex<usize>,
    /// The lab applies standing fault rules (`roce lab up --rule`): they act on
    /// every frame, so each scenario has the switch to itself, with them.
    standing_rules: bool,
    wire: RwLock<()>,
    /// The lab's agents between scenarios (and between runs, when the caller
    /// keeps them: [`run_all_in`]).
    pool: &'p AgentPool,
    /// Why the rest cannot run (the lab could not be brought back, or the run
    /// was stopped).
    stopped: Mutex<Option<String>>,
}

impl Shared<'_> {
    fn take(&self) -> Option<usize> {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let i = self.order.get(*next).copied()?;
        *next += 1;
        Some(i)
    }

    fn stopped(&self) -> Option<String> {
        self.stopped.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn stop(&self, why: String) {
        self.stopped.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(why);
    }
}

/// One worker of a run: takes scenarios in order and carries each out in its
/// slot, handing the outcome on; judging is the caller's, so it overlaps the
/// next scenario's setup.
fn worker(
    plan: &RunPlan,
    scenarios: &[(PathBuf, Scenario)],
    caps: &[PathBuf],
    shared: &Shared,
    index: usize,
    tx: &mpsc::Sender<(usize, Result<Executed, String>)>,
) {
    while let Some(i) = shared.take() {
        let sc = &scenarios[i].1;
        if let Some(why) = shared.stopped() {
            if tx.send((i, Err(why))).is_err() {
                return;
            }
            continue;
        }
        let share = !shared.standing_rules && sc.needs_the_wire_alone().is_none();
        let slot = Slot { index, shared: share, side_by_side: share && plan.jobs > 1 };
        let alone = !slot.shared;
        let mut guard = WireGuard::take(&shared.wire, alone);
        if let (Endpoints::Lab(lab), true) = (&plan.endpoints, i > 0) {
            if let Err(why) = lab::usable(&lab.paths) {
                // Bringing the lab back stops everything on it: wait for the
                // others to end their scenarios, and hold the next ones back.
                drop(guard);
                let w = shared.wire.write().unwrap_or_else(|e| e.into_inner());
                if lab::usable(&lab.paths).is_err() {
                    // No scenario runs now: every kept agent is in the pool.
                    shared.pool.clear();
                    if let Err(e) = heal_lab(lab, &why) {
                        shared.stop(format!("not run: the lab could not be brought back ({e:#})"));
                    }
                }
                drop(w);
                guard = WireGuard::take(&shared.wire, alone);
            }
        }
        let ex = match shared.stopped() {
            Some(why) => Err(why),
            None => carry_out(plan, sc, &caps[i], shared.pool, slot).map_err(|e| format!("{e:#}")),
        };
        drop(guard);
        if tx.send((i, ex)).is_err() {
            return;
        }
    }
}

/// The lab's wire, held for a scenario: shared with others, or alone.
enum WireGuard<'a> {
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Alone(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

impl<'a> WireGuard<'a> {
    fn take(l: &'a RwLock<()>, alone: bool) -> WireGuard<'a> {
        if alone {
            WireGuard::Alone(l.write().unwrap_or_else(|e| e.into_inner()))
        } else {
            WireGuard::Shared(l.read().unwrap_or_else(|e| e.into_inner()))
        }
    }
}

/// Runs `scenarios` (checked already) as `plan` says: up to `plan.jobs` side by
/// side, each scenario's frames recorded into its own capture. Side by side, the
/// scenarios that may share the wire go first, then those that need it alone,
/// one at a time. Each result and its decoded wire go to `done` as soon as it is
/// judged (in the scenarios' order with one job; as they end with more); the
/// report keeps the scenarios' order. A broken lab is brought back before the
/// next scenario; one that cannot be fails the rest, not run.
pub(crate) fn run_all(
    plan: &RunPlan,
    scenarios: &[(PathBuf, Scenario)],
    done: impl FnMut(&ScenarioResult, Option<&Timeline>) -> std::io::Result<()>,
) -> Result<RunResults> {
    run_all_in(plan, &AgentPool::default(), scenarios, done)
}

/// [`run_all`], its lab agents taken from and left in `pool`: a caller that runs
/// one scenario after another (the fuzzer) starts the agents once, not per run.
/// A lab the caller brings back itself must be brought back with
/// [`heal_if_broken`] and the same pool.
pub(crate) fn run_all_in(
    plan: &RunPlan,
    pool: &AgentPool,
    scenarios: &[(PathBuf, Scenario)],
    mut done: impl FnMut(&ScenarioResult, Option<&Timeline>) -> std::io::Result<()>,
) -> Result<RunResults> {
    std::fs::create_dir_all(&plan.out_dir)
        .with_context(|| format!("creating {}", plan.out_dir.display()))?;
    let start = Instant::now();
    let mut taken = BTreeMap::new();
    let caps: Vec<PathBuf> =
        scenarios.iter().map(|(file, _)| capture_path(&plan.out_dir, file, &mut taken)).collect();
    let standing_rules = match &plan.endpoints {
        Endpoints::Lab(lab) => lab::client::request(&lab.paths, &lab::control::Request::Status)
            .map(|st| st["standing_rules"].as_array().is_some_and(|r| !r.is_empty()))
            .unwrap_or(false),
        Endpoints::Remote(_) => false,
    };
    let jobs = if standing_rules { 1 } else { plan.jobs.clamp(1, scenarios.len().max(1)) };
    let mut order: Vec<usize> = (0..scenarios.len()).collect();
    if jobs > 1 {
        order.sort_by_key(|&i| scenarios[i].1.needs_the_wire_alone().is_some());
    }
    let shared = Shared {
        order,
        next: Mutex::new(0),
        standing_rules,
        wire: RwLock::new(()),
        pool,
        stopped: Mutex::new(None),
    };
    let mut judged: Vec<Option<(ScenarioResult, Option<Timeline>, bool)>> =
        scenarios.iter().map(|_| None).collect();
    let mut failure: Option<anyhow::Error> = None;
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        for index in 0..jobs {
            let (tx, shared, caps) = (tx.clone(), &shared, &caps);
            s.spawn(move || worker(plan, scenarios, caps, shared, index, &tx));
        }
        drop(tx);
        for (i, ex) in rx {
            let (file, sc) = &scenarios[i];
            let (mut r, wire, unknown) = match ex {
                Ok(ex) => judge_one(plan, file, sc, ex),
                Err(why) => (
                    ScenarioResult::not_run(
                        &sc.name,
                        file,
                        sc.faults.iter().map(|f| f.describe()).collect(),
                        &why,
                    ),
                    None,
                    false,
                ),
            };
            let mut laps = Laps::start();
            if let Err(e) = done(&r, wire.as_ref()) {
                // Nowhere to report to: the rest is not started.
                shared.stop(format!("not run: {e}"));
                failure.get_or_insert(e.into());
            }
            if !r.timings.is_empty() {
                laps.lap(&mut r.timings, Phase::Report);
            }
            judged[i] = Some((r, wire, unknown));
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let (mut results, mut wires, mut not_in_profile) = (Vec::new(), Vec::new(), Vec::new());
    for (r, wire, unknown) in judged.into_iter().flatten() {
        if unknown {
            not_in_profile.push(r.name.clone());
        }
        results.push(r);
        wires.push(wire);
    }
    let report = Report::new(
        results,
        start.elapsed().as_secs_f64(),
        plan.profile.as_ref().map(|p| p.name.clone()),
    );
    Ok(RunResults { report, wires, not_in_profile })
}

/// Seed scenarios on a booted lab (`roce lab bench`), one after the other and
/// then four side by side: how many a minute, what each costs beyond its own
/// traffic (the span from its first frame to its last on the wire), and where
/// that time goes, phase by phase.
pub(crate) fn bench_scenarios(
    lab: &lab::state::LabPaths,
    image: Release,
    dir: &Path,
    tmp: &Path,
    p: &lab::Progress,
) -> Result<Vec<(String, String)>> {
    let files = crate::scenario::discover(&[dir.to_path_buf()])?;
    let mut loaded = Vec::new();
    for f in &files {
        let cases = crate::scenario::load(f).map_err(|d| match d.first() {
            Some(d) => anyhow!("{d}"),
            None => anyhow!("{}: cannot be loaded", f.display()),
        })?;
        loaded.extend(cases.into_iter().map(|sc| (f.clone(), sc)));
    }
    let mut rows = Vec::new();
    for jobs in [1, 4] {
        let plan = RunPlan {
            endpoints: Endpoints::Lab(LabRef { paths: lab.clone(), image }),
            wire: WireSource::Switch,
            at_agents: false,
            out_dir: tmp.join(format!("j{jobs}")),
            profile: None,
            jobs,
            crashes: Default::default(),
            snapshots: None,
        };
        let r = run_all(&plan, &loaded, |res, _| {
            p.say(&format!("scenario (-j {jobs}): {}", res.name));
            Ok(())
        })?;
        let report = r.report;
        let traffic: f64 = report
            .scenarios
            .iter()
            .filter_map(|s| s.capture.as_deref())
            .map(|c| traffic_secs(Path::new(c)))
            .sum();
        let (n, total) = (loaded.len().max(1) as f64, report.duration_s);
        let per = if jobs == 1 {
            format!(
                "; per scenario {:.2} s, of which {:.2} s beyond its own traffic",
                total / n,
                (total - traffic) / n
            )
        } else {
            String::new()
        };
        rows.push((
            format!("seed scenarios ({}), -j {jobs}", dir.display()),
            format!(
                "{} in {total:.1} s = {:.0} scenarios/min ({} passed){per}",
                loaded.len(),
                loaded.len() as f64 / total * 60.0,
                report.passed
            ),
        ));
        if jobs == 1 {
            let timings: Vec<_> = report.scenarios.iter().map(|s| s.timings.clone()).collect();
            for (phase, mean, _) in crate::results::phase_means(&timings) {
                rows.push((format!("  per scenario: {}", phase.label()), format!("{mean:.1} ms")));
            }
        }
    }
    Ok(rows)
}

/// The span of a capture, from its first frame to its last (0 when it has fewer
/// than two, or cannot be read).
fn traffic_secs(capture: &Path) -> f64 {
    let Ok((_, pkts)) = lab::record::read_capture(capture) else { return 0.0 };
    match (pkts.iter().map(|x| x.ts_ns).min(), pkts.iter().map(|x| x.ts_ns).max()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in agent on loopback: it says hello, then answers `Setup` the way
    /// an agent on a device without the verb does.
    fn agent_lacking_a_verb() -> String {
        use crate::protocol::{self, FromAgent, ToAgent};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = s.try_clone().unwrap();
            let mut w = s;
            while let Ok(Some(m)) = protocol::read_msg::<_, ToAgent>(&mut r) {
                let answer = match m {
                    ToAgent::Hello { .. } => FromAgent::Hello {
                        version: protocol::VERSION,
                        agent: "stand-in".into(),
                        host: "h".into(),
                        kernel: Some("6.1".into()),
                    },
                    ToAgent::Teardown => FromAgent::TornDown { counters: None },
                    _ => FromAgent::Error {
                        message: "ibv_wr_flush: not supported by this device or kernel".into(),
                        verb: Some("ibv_wr_flush".into()),
                        errno: Some(libc::EOPNOTSUPP),
                        hint: Some("RDMA FLUSH needs kernel 6.2".into()),
                        unsupported: true,
                    },
                };
                protocol::write_msg(&mut w, &answer).unwrap();
            }
        });
        addr
    }

    /// A verb the device lacks ends the scenario as skipped, with the reason: not
    /// failed, not judged.
    #[test]
    fn a_device_without_the_verb_skips_the_scenario() {
        let sc = crate::scenario::check::parse_str(Path::new("t.toml"), "name = 'needs flush'\n[endpoints.a]\n[[expect.memory]]\non = 'a'\nmr = 'm'\nunchanged = true\n[[mr]]\nname = 'm'\non = 'a'\nsize = 8\n")
            .unwrap_or_else(|e| panic!("{}", e[0]));
        let out = std::env::temp_dir().join(format!("roce-skip-{}", std::process::id()));
        let plan = RunPlan {
            endpoints: Endpoints::Remote(RemoteAgents {
                addrs: [("a".to_string(), agent_lacking_a_verb())].into(),
                key: None,
                bridge: None,
            }),
            wire: WireSource::None,
            at_agents: false,
            out_dir: out.clone(),
            profile: None,
            jobs: 1,
            crashes: Default::default(),
            snapshots: None,
        };
        let mut seen = Vec::new();
        let r = run_all(&plan, &[(PathBuf::from("t.toml"), sc)], |res, _| {
            seen.push(res.status);
            Ok(())
        })
        .unwrap();
        std::fs::remove_dir_all(&out).ok();
        let s = &r.report.scenarios[0];
        assert_eq!((s.status, s.pass), (Status::Skipped, false));
        assert_eq!(seen, [Status::Skipped]);
        assert!(s.verdicts.is_empty() && s.error.is_none(), "{s:?}");
        assert_eq!(
            s.skip_reason.as_deref(),
            Some("endpoint a: the device lacks ibv_wr_flush (RDMA FLUSH needs kernel 6.2)")
        );
        assert_eq!((r.report.passed, r.report.failed, r.report.skipped), (0, 0, 1));
        // Where its time went: up to the Setup that said no, and its teardown;
        // nothing after Setup, which never finished.
        assert!(
            s.timings.contains_key(&Phase::AgentStart) && s.timings.contains_key(&Phase::Teardown),
            "{:?}",
            s.timings
        );
        assert!(
            !s.timings.contains_key(&Phase::Connect) && !s.timings.contains_key(&Phase::Steps),
            "{:?}",
            s.timings
        );
        let j = serde_json::to_value(&r.report).unwrap();
        assert_eq!(j["scenarios"][0]["status"], "skipped");
        let suite = crate::results::suite::Suite::from_report(&r.report);
        assert_eq!(suite.scenarios["needs flush"].skipped.as_deref(), s.skip_reason.as_deref());
    }

    /// A scenario the profile says crashes the setup is skipped with its
    /// reason, and nothing of it reaches an agent (none listens here).
    #[test]
    fn what_crashes_the_setup_is_never_run() {
        let sc = crate::scenario::check::parse_str(Path::new("t.toml"), "name = 'oops'\n[endpoints.a]\n[[mr]]\nname = 'm'\non = 'a'\nsize = 8\n[[expect.memory]]\non = 'a'\nmr = 'm'\nunchanged = true\n")
            .unwrap_or_else(|e| panic!("{}", e[0]));
        let out = std::env::temp_dir().join(format!("roce-crashes-{}", std::process::id()));
        let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = nobody.local_addr().unwrap().to_string();
        drop(nobody);
        let mut plan = RunPlan {
            endpoints: Endpoints::Remote(RemoteAgents {
                addrs: [("a".to_string(), addr)].into(),
                key: None,
                bridge: None,
            }),
            wire: WireSource::None,
            at_agents: false,
            out_dir: out.clone(),
            profile: None,
            jobs: 1,
            crashes: [("oops".to_string(), "BUG: kernel NULL pointer dereference".to_string())]
                .into(),
            snapshots: None,
        };
        let loaded = [(PathBuf::from("t.toml"), sc)];
        let r = run_all(&plan, &loaded, |_, _| Ok(())).unwrap();
        let s = &r.report.scenarios[0];
        assert_eq!(s.status, Status::Skipped, "{s:?}");
        assert!(s.error.is_none() && s.verdicts.is_empty(), "{s:?}");
        assert!(
            s.skip_reason
                .as_deref()
                .is_some_and(|w| w.contains("crashes this setup") && w.contains("NULL pointer")),
            "{:?}",
            s.skip_reason
        );
        // Without the word of a profile it is run: here, to an agent that is not there.
        plan.crashes.clear();
        let r = run_all(&plan, &loaded, |_, _| Ok(())).unwrap();
        std::fs::remove_dir_all(&out).ok();
        assert_eq!(r.report.scenarios[0].status, Status::Failed);
    }

    #[test]
    fn capture_paths_are_unique() {
        let mut taken = BTreeMap::new();
        let out = Path::new("/r");
        assert_eq!(
            capture_path(out, Path::new("x/rc_send.toml"), &mut taken),
            Path::new("/r/rc_send.pcapng")
        );
        assert_eq!(
            capture_path(out, Path::new("y/rc_send.toml"), &mut taken),
            Path::new("/r/rc_send-2.pcapng")
        );
    }

    /// A run stopped by a VM that went away says what that VM's kernel said
    /// since the scenario began, and nothing from before it.
    #[test]
    fn a_stopped_run_quotes_the_kernel_of_the_vm_that_went_away() {
        let root = std::env::temp_dir().join(format!("roce-kernel-says-{}", std::process::id()));
        let paths = lab::state::LabPaths::new(&root, "t").unwrap();
        std::fs::create_dir_all(&paths.dir).unwrap();
        let b = paths.console(lab::state::Vm::B);
        std::fs::write(&b, "[    1.0] BUG: an old one, from before\n").unwrap();
        let eps = Endpoints::Lab(LabRef { paths: paths.clone(), image: Release::Bookworm });
        let says = KernelSays::watch(&eps);
        let mut f = std::fs::OpenOptions::new().append(true).open(&b).unwrap();
        std::io::Write::write_all(
            &mut f,
            b"[   99.1] BUG: kernel NULL pointer dereference, address: 0000000000000160\n\
              [   99.2] RIP: 0010:__rxe_put+0xf/0x50 [rdma_rxe]\n",
        )
        .unwrap();
        let mut e = "endpoint b's agent: VM b: the VM went away".to_string();
        says.add_to(&mut e);
        assert_eq!(
            e,
            "endpoint b's agent: VM b: the VM went away\nVM b's kernel: BUG: kernel NULL pointer \
             dereference, address: 0000000000000160 at __rxe_put+0xf/0x50 [rdma_rxe]"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
