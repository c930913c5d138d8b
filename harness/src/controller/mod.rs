//! Drives scenarios: for each one, the agents (in the lab's VMs or on real hosts)
//! through the agent protocol, the wire's recording (the lab switch, or a live
//! capture), then the judge; and the lab kept healthy between scenarios.
//!
//! Owns: the run plan, the agent links, the run loop.
//! Imports: scenario, agent's protocol, judge, results, net, the lab crate. Never
//! the CLI or the renderers: results go back to the caller as they come.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use lab::image::Release;

use crate::results::profile::Profile;
use crate::judge::{self, Timeline};
use crate::results::{Laps, Phase, Report, ScenarioResult, Status};
use crate::scenario::model::Scenario;

mod link;
mod resolve;
mod runner;

pub(crate) use crate::results::Outcome;
pub(crate) use runner::{AgentPool, Endpoints, LabRef, RemoteAgents};

/// How a scenario's wire is recorded.
#[derive(Debug, Clone)]
pub(crate) enum WireSource {
    /// The lab's switch records it (lab endpoints).
    Switch,
    /// A live capture on this host's interface, with a libpcap filter.
    Live { iface: String, filter: String },
    /// A capture the user made while the (single) scenario ran.
    File(PathBuf),
    /// Nothing records it: wire expectations fail, saying so.
    None,
}

/// What `roce run` and `roce suite` settled before anything runs: where the
/// endpoints are, how the wire is recorded, where captures go, which profile holds.
pub(crate) struct RunPlan {
    pub endpoints: Endpoints,
    pub wire: WireSource,
    /// Each scenario's capture is kept here.
    pub out_dir: PathBuf,
    pub profile: Option<Profile>,
}

/// Lab endpoints: the lab `name` under `root`, booted when it is not up.
pub(crate) fn lab_endpoints(root: Option<PathBuf>, name: Option<String>, image: Release) -> Result<Endpoints> {
    let paths = lab::lab_paths(root, name, image)?;
    let lab = LabRef { paths, image };
    if !lab.paths.is_running() {
        boot_lab(&lab, &format!("lab `{}` is not up: booting it (it stays up for later runs; `roce lab down` stops it)", lab.paths.name))?;
    } else {
        // The lab that is up must be the image asked for: `lab::up` says so if not.
        boot_lab(&lab, "")?;
    }
    Ok(Endpoints::Lab(lab))
}

fn boot_lab(lab: &LabRef, why: &str) -> Result<()> {
    let p = lab::Progress::new(why.is_empty());
    p.say(why);
    let paths = &lab.paths;
    let opts = lab::UpOpts { image: lab.image, accel: lab::Accel::Auto, boot_timeout: std::time::Duration::from_secs(300), idle_timeout_min: 120, rules: vec![], seed: 1 };
    let up = lab::up(paths, &opts, &p)?;
    p.say(&up.describe(paths));
    Ok(())
}

/// Before a scenario: a lab whose VM died or hung during the last one (or that
/// went down) is brought back, so one broken VM fails one scenario, not the rest.
/// The agents kept from earlier scenarios die with a restarted lab: `pool` is
/// emptied then.
fn heal_lab(lab: &LabRef, pool: &mut AgentPool) -> Result<()> {
    let paths = &lab.paths;
    let why = if !paths.is_running() {
        "it is down".to_string()
    } else {
        match lab::client::request(paths, &lab::control::Request::Status) {
            Ok(st) if st["phase"] == "ready" => return Ok(()),
            Ok(st) => st["error"].as_str().map(|e| e.lines().next().unwrap_or(e).to_string()).unwrap_or_else(|| format!("it is {}", st["phase"])),
            Err(e) => format!("its daemon does not answer ({e:#})"),
        }
    };
    pool.clear();
    lab::stop(paths).with_context(|| format!("stopping the broken lab `{}`", paths.name))?;
    boot_lab(lab, &format!("lab `{}` is not usable ({why}): restarting it for the next scenario", paths.name))
}

/// The capture file of a scenario: `<out>/<file stem>.pcapng`, unique.
pub(crate) fn capture_path(out: &Path, file: &Path, taken: &mut BTreeMap<PathBuf, ()>) -> PathBuf {
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "scenario".into());
    let mut p = out.join(format!("{stem}.pcapng"));
    let mut i = 2;
    while taken.contains_key(&p) {
        p = out.join(format!("{stem}-{i}.pcapng"));
        i += 1;
    }
    taken.insert(p.clone(), ());
    p
}

/// Runs one loaded scenario: the outcome and how long it took.
pub(crate) fn run_one(sc: &Scenario, eps: &Endpoints, capture: &Path, pool: &mut AgentPool) -> (Outcome, f64) {
    let t = Instant::now();
    let cap = matches!(eps, Endpoints::Lab(_)).then(|| capture.to_path_buf());
    let o = runner::execute(sc, eps, cap, pool);
    (o, t.elapsed().as_secs_f64())
}

/// A live capture to a pcapng file while a scenario runs on real hosts.
pub(crate) struct Recording {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    done: std::thread::JoinHandle<Result<u64>>,
}

impl Recording {
    /// Starts capturing on `iface`; returns once the capture is open.
    pub(crate) fn start(iface: &str, filter: &str, path: &Path) -> Result<Recording> {
        let opts = crate::net::live::LiveOptions { iface: iface.to_string(), filter: filter.to_string(), ..Default::default() };
        let path = path.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let done = std::thread::spawn(move || -> Result<u64> {
            let mut cap = match crate::net::live::LiveCapture::open(&opts) {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(anyhow!("{e}")));
                    return Ok(0);
                }
            };
            let _ = tx.send(Ok(cap.stop_handle()));
            let mut out = dissector::capture::RecordFile::create(&path, concat!("roce ", env!("CARGO_PKG_VERSION")))?;
            let mut n = 0;
            while let Some(r) = cap.next_packet().map_err(|e| anyhow!("{e}"))? {
                out.write(&r)?;
                n += 1;
            }
            out.commit()?;
            Ok(n)
        });
        let stop = rx.recv().map_err(|_| anyhow!("the capture thread ended"))??;
        Ok(Recording { stop, done })
    }

    /// Stops the capture and publishes the file; the number of frames.
    pub(crate) fn finish(self) -> Result<u64> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.done.join().map_err(|_| anyhow!("the capture thread panicked"))?
    }
}

/// What a run of several scenarios produced.
pub(crate) struct RunResults {
    pub report: Report,
    /// Each scenario's decoded wire, in report order (for renderers that draw it).
    pub wires: Vec<Option<Timeline>>,
    /// Scenarios the profile does not know (nothing compared for them).
    pub not_in_profile: Vec<String>,
}

/// One scenario, carried out and judged: its result and its decoded wire.
fn run_and_judge(
    plan: &RunPlan,
    file: &Path,
    sc: &Scenario,
    cap: &Path,
    not_in_profile: &mut Vec<String>,
    pool: &mut AgentPool,
) -> Result<(ScenarioResult, Option<Timeline>)> {
    let faults: Vec<String> = sc.faults.iter().map(|f| f.describe()).collect();
    let rec = match &plan.wire {
        WireSource::Live { iface, filter } => Some(Recording::start(iface, filter, cap).with_context(|| format!("capturing on {iface}"))?),
        _ => None,
    };
    let (mut o, secs) = run_one(sc, &plan.endpoints, cap, pool);
    if let WireSource::File(p) = &plan.wire {
        o.capture = Some(p.clone());
    }
    if let (Some(r), WireSource::Live { iface, .. }) = (rec, &plan.wire) {
        match r.finish() {
            Ok(_) => o.capture = Some(cap.to_path_buf()),
            Err(e) => {
                o.error.get_or_insert(format!("the capture on {iface}: {e:#}"));
            }
        }
    }
    let base = ScenarioResult {
        name: sc.name.clone(),
        file: file.display().to_string(),
        pass: false,
        status: Status::Failed,
        skip_reason: None,
        error: o.error.clone(),
        verdicts: Vec::new(),
        capture: o.capture.as_ref().map(|p| p.display().to_string()),
        duration_s: secs,
        agent_logs: o.agent_logs.clone(),
        endpoints: o.endpoints.clone(),
        connections: o.connections.clone(),
        faults,
        observations: Default::default(),
        timings: o.timings.clone(),
    };
    if let Some(why) = &o.skipped {
        return Ok((ScenarioResult { status: Status::Skipped, skip_reason: Some(why.clone()), ..base }, None));
    }
    let mut laps = Laps::start();
    let wire = judge::wire_of(&o);
    let (mut verdicts, observations) = judge::judge(sc, &o, &wire);
    if let Some(p) = &plan.profile {
        match judge::profile::verdicts(p, &sc.name, &observations) {
            Some(v) => verdicts.extend(v),
            None => not_in_profile.push(sc.name.clone()),
        }
    }
    let pass = o.error.is_none() && verdicts.iter().all(|v| v.pass);
    let status = if pass { Status::Passed } else { Status::Failed };
    let mut r = ScenarioResult { pass, status, verdicts, observations, ..base };
    laps.lap(&mut r.timings, Phase::Judge);
    Ok((r, wire.ok()))
}

/// Runs `scenarios` (checked already) one after the other as `plan` says, handing
/// each result and its decoded wire to `done` as soon as it is judged. A broken lab
/// is brought back before the next scenario; one that cannot be fails the rest,
/// not run.
pub(crate) fn run_all(
    plan: &RunPlan,
    scenarios: &[(PathBuf, Scenario)],
    mut done: impl FnMut(&ScenarioResult, Option<&Timeline>) -> std::io::Result<()>,
) -> Result<RunResults> {
    std::fs::create_dir_all(&plan.out_dir).with_context(|| format!("creating {}", plan.out_dir.display()))?;
    let start = Instant::now();
    let mut taken = BTreeMap::new();
    let mut results = Vec::new();
    let mut wires = Vec::new();
    let mut not_in_profile = Vec::new();
    let mut pool = AgentPool::default();
    let mut lab_lost: Option<String> = None;
    for (i, (file, sc)) in scenarios.iter().enumerate() {
        if let (Endpoints::Lab(lab), true, None) = (&plan.endpoints, i > 0, &lab_lost) {
            if let Err(e) = heal_lab(lab, &mut pool) {
                lab_lost = Some(format!("not run: the lab could not be brought back ({e:#})"));
            }
        }
        let (r, wire) = match &lab_lost {
            Some(why) => (ScenarioResult::not_run(&sc.name, file, sc.faults.iter().map(|f| f.describe()).collect(), why), None),
            None => {
                let cap = capture_path(&plan.out_dir, file, &mut taken);
                run_and_judge(plan, file, sc, &cap, &mut not_in_profile, &mut pool)?
            }
        };
        let mut laps = Laps::start();
        done(&r, wire.as_ref())?;
        let mut r = r;
        if !r.timings.is_empty() {
            laps.lap(&mut r.timings, Phase::Report);
        }
        results.push(r);
        wires.push(wire);
    }
    let report = Report::new(results, start.elapsed().as_secs_f64(), plan.profile.as_ref().map(|p| p.name.clone()));
    Ok(RunResults { report, wires, not_in_profile })
}

/// Seed scenarios on a booted lab (`roce lab bench`): how many a minute, and what
/// each costs beyond its own traffic (the span from its first frame to its last on
/// the wire).
pub(crate) fn bench_scenarios(lab: &lab::state::LabPaths, image: Release, dir: &Path, tmp: &Path, p: &lab::Progress) -> Result<Vec<(String, String)>> {
    let files = crate::scenario::discover(&[dir.to_path_buf()])?;
    let eps = Endpoints::Lab(LabRef { paths: lab.clone(), image });
    let (mut total, mut traffic, mut passed) = (0.0f64, 0.0f64, 0);
    let mut timings = Vec::new();
    let mut pool = AgentPool::default();
    for (i, f) in files.iter().enumerate() {
        let sc = crate::scenario::load(f).map_err(|d| anyhow!("{}", d[0]))?;
        p.say(&format!("scenario: {}", sc.name));
        let cap = tmp.join(format!("scenario-{i}.pcapng"));
        let (mut o, secs) = run_one(&sc, &eps, &cap, &mut pool);
        let mut laps = Laps::start();
        let ok = o.error.is_none() && o.skipped.is_none() && judge::judge(&sc, &o, &judge::wire_of(&o)).0.iter().all(|v| v.pass);
        laps.lap(&mut o.timings, Phase::Judge);
        total += secs + o.timings.get(&Phase::Judge).copied().unwrap_or(0.0) / 1000.0;
        passed += usize::from(ok);
        timings.push(o.timings);
        if let Ok((_, pkts)) = lab::record::read_capture(&cap) {
            if let (Some(a), Some(b)) = (pkts.iter().map(|x| x.ts_ns).min(), pkts.iter().map(|x| x.ts_ns).max()) {
                traffic += (b - a) as f64 / 1e9;
            }
        }
    }
    let n = files.len().max(1) as f64;
    let mut rows = vec![(
        format!("seed scenarios ({})", dir.display()),
        format!(
            "{} in {total:.1} s = {:.0} scenarios/min ({passed} passed); per scenario {:.2} s, of which {:.2} s beyond its own traffic",
            files.len(),
            files.len() as f64 / total * 60.0,
            total / n,
            (total - traffic) / n
        ),
    )];
    // Where a scenario's time goes, phase by phase (the mean per scenario).
    for (phase, mean, _) in crate::results::phase_means(&timings) {
        rows.push((format!("  per scenario: {}", phase.label()), format!("{mean:.1} ms")));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in agent on loopback: it says hello, then answers `Setup` the way
    /// an agent on a device without the verb does.
    fn agent_lacking_a_verb() -> String {
        use crate::agent::proto::{self, FromAgent, ToAgent};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = s.try_clone().unwrap();
            let mut w = s;
            while let Ok(Some(m)) = proto::read_msg::<_, ToAgent>(&mut r) {
                let answer = match m {
                    ToAgent::Hello { .. } => FromAgent::Hello { version: proto::VERSION, agent: "stand-in".into(), host: "h".into(), kernel: Some("6.1".into()) },
                    ToAgent::Teardown => FromAgent::TornDown,
                    _ => FromAgent::Error {
                        message: "ibv_wr_flush: not supported by this device or kernel".into(),
                        verb: Some("ibv_wr_flush".into()),
                        errno: Some(libc::EOPNOTSUPP),
                        hint: Some("RDMA FLUSH needs kernel 6.2".into()),
                        unsupported: true,
                    },
                };
                proto::write_msg(&mut w, &answer).unwrap();
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
            endpoints: Endpoints::Remote(RemoteAgents { addrs: [("a".to_string(), agent_lacking_a_verb())].into(), key: None }),
            wire: WireSource::None,
            out_dir: out.clone(),
            profile: None,
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
        assert_eq!(s.skip_reason.as_deref(), Some("endpoint a: the device lacks ibv_wr_flush (RDMA FLUSH needs kernel 6.2)"));
        assert_eq!((r.report.passed, r.report.failed, r.report.skipped), (0, 0, 1));
        // Where its time went: up to the Setup that said no, and its teardown;
        // nothing after Setup, which never finished.
        assert!(s.timings.contains_key(&Phase::AgentStart) && s.timings.contains_key(&Phase::Teardown), "{:?}", s.timings);
        assert!(!s.timings.contains_key(&Phase::Connect) && !s.timings.contains_key(&Phase::Steps), "{:?}", s.timings);
        let j = serde_json::to_value(&r.report).unwrap();
        assert_eq!(j["scenarios"][0]["status"], "skipped");
        let suite = crate::results::suite::Suite::from_report(&r.report);
        assert_eq!(suite.scenarios["needs flush"].skipped.as_deref(), s.skip_reason.as_deref());
    }

    #[test]
    fn capture_paths_are_unique() {
        let mut taken = BTreeMap::new();
        let out = Path::new("/r");
        assert_eq!(capture_path(out, Path::new("x/rc_send.toml"), &mut taken), Path::new("/r/rc_send.pcapng"));
        assert_eq!(capture_path(out, Path::new("y/rc_send.toml"), &mut taken), Path::new("/r/rc_send-2.pcapng"));
    }
}
