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
use lab::state::LabPaths;

use crate::results::profile::Profile;
use crate::results::{Report, ScenarioResult};
use crate::scenario::model::Scenario;

pub mod runner;

pub use crate::results::Outcome;
pub use runner::Endpoints;

/// How a scenario's wire is recorded.
#[derive(Debug, Clone)]
pub enum WireSource {
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
pub struct RunPlan {
    pub endpoints: Endpoints,
    pub wire: WireSource,
    /// Each scenario's capture is kept here.
    pub out_dir: PathBuf,
    pub profile: Option<Profile>,
}

/// Lab endpoints: the lab `name` under `root`, booted when it is not up.
pub fn lab_endpoints(root: Option<PathBuf>, name: Option<String>) -> Result<Endpoints> {
    let paths = lab::lab_paths(root, name)?;
    if !paths.is_running() {
        boot_lab(&paths, &format!("lab `{}` is not up: booting it (it stays up for later runs; `roce lab down` stops it)", paths.name))?;
    }
    Ok(Endpoints::Lab(paths))
}

fn boot_lab(paths: &LabPaths, why: &str) -> Result<()> {
    let p = lab::Progress::new(false);
    p.say(why);
    let opts = lab::UpOpts { accel: lab::Accel::Auto, boot_timeout: std::time::Duration::from_secs(300), idle_timeout_min: 120, rules: vec![], seed: 1 };
    let up = lab::up(paths, &opts, &p)?;
    p.say(&up.describe(paths));
    Ok(())
}

/// Before a scenario: a lab whose VM died or hung during the last one (or that
/// went down) is brought back, so one broken VM fails one scenario, not the rest.
fn heal_lab(paths: &LabPaths) -> Result<()> {
    let why = if !paths.is_running() {
        "it is down".to_string()
    } else {
        match lab::client::request(paths, &lab::control::Request::Status) {
            Ok(st) if st["phase"] == "ready" => return Ok(()),
            Ok(st) => st["error"].as_str().map(|e| e.lines().next().unwrap_or(e).to_string()).unwrap_or_else(|| format!("it is {}", st["phase"])),
            Err(e) => format!("its daemon does not answer ({e:#})"),
        }
    };
    lab::stop(paths).with_context(|| format!("stopping the broken lab `{}`", paths.name))?;
    boot_lab(paths, &format!("lab `{}` is not usable ({why}): restarting it for the next scenario", paths.name))
}

/// The capture file of a scenario: `<out>/<file stem>.pcapng`, unique.
pub fn capture_path(out: &Path, file: &Path, taken: &mut BTreeMap<PathBuf, ()>) -> PathBuf {
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
pub fn run_one(sc: &Scenario, eps: &Endpoints, capture: &Path) -> (Outcome, f64) {
    let t = Instant::now();
    let cap = matches!(eps, Endpoints::Lab(_)).then(|| capture.to_path_buf());
    let o = runner::execute(sc, eps, cap);
    (o, t.elapsed().as_secs_f64())
}

/// A live capture to a pcapng file while a scenario runs on real hosts.
pub struct Recording {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    done: std::thread::JoinHandle<Result<u64>>,
}

impl Recording {
    /// Starts capturing on `iface`; returns once the capture is open.
    pub fn start(iface: &str, filter: &str, path: &Path) -> Result<Recording> {
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
    pub fn finish(self) -> Result<u64> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.done.join().map_err(|_| anyhow!("the capture thread panicked"))?
    }
}

/// What a run of several scenarios produced.
pub struct RunResults {
    pub report: Report,
    /// Scenarios the profile does not know (nothing compared for them).
    pub not_in_profile: Vec<String>,
}

/// A `[[fault]]` rule for the reports: `drop psn=101 nth=1 (from a, QP q)`.
pub fn describe_fault(f: &crate::scenario::model::FaultSpec) -> String {
    let scope: Vec<String> = f.from.iter().map(|e| format!("from {e}")).chain(f.qp.iter().map(|q| format!("QP {q}"))).collect();
    if scope.is_empty() {
        f.rule.clone()
    } else {
        format!("{} ({})", f.rule, scope.join(", "))
    }
}

/// Runs `scenarios` (checked already) one after the other as `plan` says, handing
/// each result to `done` as soon as it is judged. A broken lab is brought back
/// before the next scenario; one that cannot be fails the rest, not run.
pub fn run_all(
    plan: &RunPlan,
    scenarios: &[(PathBuf, Scenario)],
    mut done: impl FnMut(&ScenarioResult) -> std::io::Result<()>,
) -> Result<RunResults> {
    std::fs::create_dir_all(&plan.out_dir).with_context(|| format!("creating {}", plan.out_dir.display()))?;
    let start = Instant::now();
    let mut taken = BTreeMap::new();
    let mut results = Vec::new();
    let mut not_in_profile = Vec::new();
    let mut lab_lost: Option<String> = None;
    for (i, (file, sc)) in scenarios.iter().enumerate() {
        let faults: Vec<String> = sc.faults.iter().map(describe_fault).collect();
        if let (Endpoints::Lab(paths), true, None) = (&plan.endpoints, i > 0, &lab_lost) {
            if let Err(e) = heal_lab(paths) {
                lab_lost = Some(format!("not run: the lab could not be brought back ({e:#})"));
            }
        }
        if let Some(why) = &lab_lost {
            let r = ScenarioResult::not_run(&sc.name, file, faults, why);
            done(&r)?;
            results.push(r);
            continue;
        }
        let cap = capture_path(&plan.out_dir, file, &mut taken);
        let rec = match &plan.wire {
            WireSource::Live { iface, filter } => Some(Recording::start(iface, filter, &cap).with_context(|| format!("capturing on {iface}"))?),
            _ => None,
        };
        let (mut o, secs) = run_one(sc, &plan.endpoints, &cap);
        if let WireSource::File(p) = &plan.wire {
            o.capture = Some(p.clone());
        }
        if let Some(r) = rec {
            match r.finish() {
                Ok(_) => o.capture = Some(cap.clone()),
                Err(e) => {
                    let iface = match &plan.wire {
                        WireSource::Live { iface, .. } => iface.as_str(),
                        _ => "?",
                    };
                    o.error.get_or_insert(format!("the capture on {iface}: {e:#}"));
                }
            }
        }
        let (mut verdicts, observations) = crate::judge::judge(sc, &o);
        if let Some(p) = &plan.profile {
            match p.judge(&sc.name, &observations) {
                Some(v) => verdicts.extend(v),
                None => not_in_profile.push(sc.name.clone()),
            }
        }
        let pass = o.error.is_none() && verdicts.iter().all(|v| v.pass);
        let r = ScenarioResult {
            name: sc.name.clone(),
            file: file.display().to_string(),
            pass,
            error: o.error.clone(),
            verdicts,
            capture: o.capture.as_ref().map(|p| p.display().to_string()),
            duration_s: secs,
            agent_logs: o.agent_logs.clone(),
            endpoints: o.endpoints.clone(),
            connections: o.connections.clone(),
            faults,
            observations,
        };
        done(&r)?;
        results.push(r);
    }
    let passed = results.iter().filter(|r| r.pass).count();
    let report = Report {
        failed: results.len() - passed,
        passed,
        scenarios: results,
        duration_s: start.elapsed().as_secs_f64(),
        profile: plan.profile.as_ref().map(|p| p.name.clone()),
    };
    Ok(RunResults { report, not_in_profile })
}

/// Seed scenarios on a booted lab (`roce lab bench`): how many a minute, and what
/// each costs beyond its own traffic (the span from its first frame to its last on
/// the wire).
pub fn bench_scenarios(lab: &LabPaths, dir: &Path, tmp: &Path, p: &lab::Progress) -> Result<(String, String)> {
    let files = crate::scenario::discover(&[dir.to_path_buf()])?;
    let eps = Endpoints::Lab(lab.clone());
    let (mut total, mut traffic, mut passed) = (0.0f64, 0.0f64, 0);
    for (i, f) in files.iter().enumerate() {
        let sc = crate::scenario::parse::load(f).map_err(|d| anyhow!("{}", d[0]))?;
        p.say(&format!("scenario: {}", sc.name));
        let cap = tmp.join(format!("scenario-{i}.pcapng"));
        let (o, secs) = run_one(&sc, &eps, &cap);
        total += secs;
        if o.error.is_none() && crate::judge::evaluate(&sc, &o).iter().all(|v| v.pass) {
            passed += 1;
        }
        if let Ok((_, pkts)) = lab::record::read_capture(&cap) {
            if let (Some(a), Some(b)) = (pkts.iter().map(|x| x.ts_ns).min(), pkts.iter().map(|x| x.ts_ns).max()) {
                traffic += (b - a) as f64 / 1e9;
            }
        }
    }
    let n = files.len().max(1) as f64;
    Ok((
        format!("seed scenarios ({})", dir.display()),
        format!(
            "{} in {total:.1} s = {:.0} scenarios/min ({passed} passed); per scenario {:.2} s, of which {:.2} s beyond its own traffic",
            files.len(),
            files.len() as f64 / total * 60.0,
            total / n,
            (total - traffic) / n
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_paths_are_unique() {
        let mut taken = BTreeMap::new();
        let out = Path::new("/r");
        assert_eq!(capture_path(out, Path::new("x/rc_send.toml"), &mut taken), Path::new("/r/rc_send.pcapng"));
        assert_eq!(capture_path(out, Path::new("y/rc_send.toml"), &mut taken), Path::new("/r/rc_send-2.pcapng"));
    }

    #[test]
    fn fault_rules_read_as_written() {
        let f = |from: Option<&str>, qp: Option<&str>| crate::scenario::model::FaultSpec {
            rule: "drop psn=101 nth=1".into(),
            from: from.map(Into::into),
            qp: qp.map(Into::into),
        };
        assert_eq!(describe_fault(&f(Some("a"), Some("q"))), "drop psn=101 nth=1 (from a, QP q)");
        assert_eq!(describe_fault(&f(None, Some("q"))), "drop psn=101 nth=1 (QP q)");
        assert_eq!(describe_fault(&f(None, None)), "drop psn=101 nth=1");
    }
}
