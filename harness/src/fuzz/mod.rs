//! `roce fuzz`: batches of crafted requests into VM b's live QPs, each run as a
//! scenario, each judged by oracles; every finding run again to confirm it (steady,
//! or intermittent: seen in some runs only),
//! minimised to the fewest probes that still show it, and written as a scenario
//! file `roce run` reproduces.
//!
//! The oracles, each a [`Oracle`]:
//! - memory: the MR no remote access is allowed to stays as it was, the
//!   guard regions around every MR hold their canary (`outside = "unchanged"`),
//!   and every WRITE b acknowledged placed exactly its payload where it aimed
//!   (`probe_writes = "landed"`);
//! - kernel: the VMs' consoles gain no oops, BUG, WARNING, KASAN, lockup,
//!   refcount or list-corruption report, and no VM dies;
//! - liveness: after the probes, a WRITE on a fresh QP lands and completes;
//! - protocol: where IBA fixes a request's answer whatever the device (dropped
//!   silently: a bad ICRC, a foreign P_Key, TVer ≠ 0, an unknown QP, a QP in
//!   the error state, unacknowledged transports), nothing answers it.
//!
//! Owns: the run loop, findings, their confirmation and minimisation, the
//! report. Imports: `crate::controller` (running a scenario), the scenario
//! checker, the results' verdicts, the lab's console reading.
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::controller::{self, Endpoints, RunPlan, WireSource};
use crate::results::{ScenarioResult, VerdictKind};
use crate::vocab::EventType;

pub(crate) mod corpus;
mod doc;
pub(crate) mod gen;
mod minimise;
mod requester;
mod setup;
mod space;
mod trace;

use gen::Batch;

/// Probes in a batch by default: enough to build up state, few enough that a
/// batch's minimisation stays short.
pub(crate) const DEFAULT_BATCH: usize = 16;
/// Scenario runs a finding's minimisation may take, at most: with 14, the
/// 30-minute runs left requester findings of 5 or 6 items (8 to choose from),
/// where ddmin needs about 20 to reach single ones.
const MINIMISE_RUNS: usize = 24;

/// Runs, at most, of minimisation's last stage: leaving out the setup the
/// finding shows without (a batch has about 25 tables; most findings need a
/// handful, which ddmin's first try, the least setup, often finds at once).
const SETUP_RUNS: usize = 16;

/// Mixes a batch's index into the stream that picks, in a guided run, whether
/// and from which kept batch it is drawn (apart from the batch's own stream).
const GUIDE_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// Runs, at most, of minimisation's second stage: undoing the kept probes'
/// changes one at a time (a probe changes at most two fields).
const FIELD_RUNS: usize = 8;
/// Runs of a sighting's batch after the one that saw it. A finding that shows in
/// all of them is steady; one that shows in some is intermittent (a flaky NIC,
/// a `prob` fault), and its minimisation asks each smaller batch up to this many
/// times before calling it gone.
const CONFIRM_RUNS: u32 = 3;
/// Batches in a row that could not be carried out before the fuzzer stops (the
/// lab is brought back after each lost VM; this is for a harness that cannot go on).
const MAX_NOT_RUN_IN_A_ROW: u32 = 5;

/// What found a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Oracle {
    Memory,
    Kernel,
    Liveness,
    Protocol,
}

impl Oracle {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Oracle::Memory => "memory",
            Oracle::Kernel => "kernel",
            Oracle::Liveness => "liveness",
            Oracle::Protocol => "protocol",
        }
    }
}

/// What one run of a batch showed: by signature, what each oracle saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Sighting {
    pub(crate) oracle: Oracle,
    /// What stays the same when the same fault shows again (no frame numbers,
    /// addresses or probe ids): findings with one signature are one finding.
    pub(crate) signature: String,
    /// What was seen, in full.
    pub(crate) detail: String,
}

/// How often a finding showed: the run that saw it and its confirmation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Shown {
    pub(crate) runs: u32,
    pub(crate) of: u32,
}

impl Shown {
    /// Seen in every run of the batch, the first one included.
    pub(crate) fn steady(self) -> bool {
        self.runs == self.of
    }
    /// Seen in some of the runs only (once is some).
    pub(crate) fn intermittent(self) -> bool {
        !self.steady()
    }
    /// `confirmed`, `intermittent: seen 2 of 4 runs`, or `seen once` (when no
    /// confirmation ran, `--no-minimise`).
    pub(crate) fn describe(self) -> String {
        match (self.runs, self.of) {
            (r, o) if r == o && o > 1 => "confirmed".into(),
            (_, 1) => "seen once, not run again".into(),
            (r, o) => format!("intermittent: seen {r} of {o} runs"),
        }
    }
}

/// A fault found: confirmed (or not) and minimised.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Finding {
    pub(crate) oracle: Oracle,
    pub(crate) signature: String,
    pub(crate) detail: String,
    pub(crate) batch: u64,
    /// The probes (or a requester batch's rules) it takes, after minimisation.
    pub(crate) probes: Vec<String>,
    /// Seen again when the batch ran again.
    pub(crate) confirmed: bool,
    /// In how many of the batch's runs it showed.
    pub(crate) shown: Shown,
    /// It showed in some runs of the batch and not in others.
    pub(crate) intermittent: bool,
    /// Its reproducer and the capture of its last reproducing run.
    pub(crate) scenario: PathBuf,
    pub(crate) capture: Option<PathBuf>,
    /// A kernel finding's C reproducer (`repro.c`, as `roce repro` writes it), or
    /// why it has none (in the JSON: its path, or null).
    #[serde(serialize_with = "path_or_null")]
    pub(crate) reproducer: Result<PathBuf, String>,
    /// What setup minimisation left out of its batch's scenario (`QPs ud,
    /// rc_err; MR locked; step post_recv ×3`); none when it was not minimised.
    pub(crate) setup_left_out: Option<String>,
    /// Scenario runs its minimisation took.
    pub(crate) minimise_runs: usize,
    /// Its last reproducing run, as the findings page draws it.
    #[serde(skip)]
    pub(crate) run: ScenarioResult,
}

/// How long and how far to fuzz.
#[derive(Debug, Clone)]
pub(crate) struct FuzzPlan {
    /// The lab (or hosts) the batches run on.
    pub(crate) endpoints: Endpoints,
    pub(crate) seed: u64,
    /// Batches at most.
    pub(crate) budget: Option<u64>,
    pub(crate) duration: Option<Duration>,
    pub(crate) batch: usize,
    /// Confirm and minimise each new finding (else only record it).
    pub(crate) minimise: bool,
    pub(crate) plant: Option<gen::Plant>,
    /// The request messages of captures that seed responder batches.
    pub(crate) corpus: corpus::Corpus,
    /// Draw batches from those that reached new rxe code (else every batch
    /// afresh; the coverage is read and reported either way).
    pub(crate) guided: bool,
}

/// What the kernel's function tracer saw of rdma_rxe over a run, and how it
/// steered the batches.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct RxeCoverage {
    /// Why none was read: not a lab, or the tracer could not be set up.
    pub(crate) off: Option<String>,
    pub(crate) guided: bool,
    /// The rxe functions the tracer follows.
    pub(crate) traceable: usize,
    /// Distinct rxe functions reached, on either VM; caller → callee pairs.
    pub(crate) functions: usize,
    pub(crate) edges: usize,
    /// `[seconds into the run, functions reached by then]`, after each batch.
    pub(crate) over_time: Vec<(f64, usize)>,
    /// Batches kept for reaching new rxe code, and batches drawn from them.
    pub(crate) kept: usize,
    pub(crate) drawn_from_kept: u64,
    /// Trace events lost to a full ring (the reach is then a lower bound).
    pub(crate) overrun: u64,
    /// Every rxe function reached, by name.
    pub(crate) reached: Vec<String>,
}

/// A whole fuzzing run, as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FuzzReport {
    pub(crate) seed: u64,
    /// The seeds from captures: messages, and the captures they came from.
    pub(crate) corpus_messages: usize,
    pub(crate) corpus_files: Vec<String>,
    pub(crate) batches: u64,
    /// Exchanges run (in batches, not minimisation): probes sent, and a
    /// requester batch's operations.
    pub(crate) executions: u64,
    pub(crate) elapsed_s: f64,
    /// Of those seconds, spent minimising.
    pub(crate) minimise_s: f64,
    /// Executions per second, minimisation left out.
    pub(crate) executions_per_s: f64,
    pub(crate) cells_total: usize,
    pub(crate) cells_reached: usize,
    /// `opcode / class / QP`, of the cells never reached.
    pub(crate) unreached: Vec<String>,
    pub(crate) findings: Vec<Finding>,
    /// Batches that could not be judged (the lab failed to run them) and why.
    pub(crate) not_run: Vec<String>,
    /// Items left out of later batches because, with the others of their
    /// batch, they were a confirmed kernel finding's whole reproducer again:
    /// each would only take a VM down once more (a lab restart, about 14 s).
    pub(crate) avoided: u64,
    /// Whether the VMs' verbs objects could be counted (`rdma resource`): the
    /// liveness oracle's leak check.
    pub(crate) resources_counted: bool,
    /// Coverage from the target: rdma_rxe's functions reached.
    pub(crate) rxe: RxeCoverage,
    /// Where a batch's time goes, mean ms per batch (minimisation left out):
    /// the scenario run's phases, then the oracles' read-out of the VMs and the
    /// fuzzer's own work.
    pub(crate) batch_ms: Vec<PartMs>,
}

/// A part of a batch's time ([`FuzzReport::batch_ms`]).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PartMs {
    pub(crate) part: &'static str,
    pub(crate) ms: f64,
}

/// Sums where the batches' time went, for [`FuzzReport::batch_ms`].
#[derive(Default)]
struct BatchTime {
    phases: crate::results::Timings,
    readout_ms: f64,
    healing_ms: f64,
    fuzzer_ms: f64,
    batches: u64,
}

impl BatchTime {
    /// Adds a batch that took `wall` in all, `healing_ms` of it bringing the
    /// lab back.
    fn add(&mut self, ran: &Ran, wall: Duration, healing_ms: f64) {
        let phases: f64 = ran.result.timings.values().sum();
        for (p, ms) in &ran.result.timings {
            *self.phases.entry(*p).or_default() += ms;
        }
        let readout = ran.read.as_ref().map_or(0.0, |r| r.ms);
        self.readout_ms += readout;
        self.healing_ms += healing_ms;
        self.fuzzer_ms += (wall.as_secs_f64() * 1000.0 - phases - readout - healing_ms).max(0.0);
        self.batches += 1;
    }

    fn means(&self) -> Vec<PartMs> {
        let n = self.batches.max(1) as f64;
        let mut out: Vec<PartMs> =
            self.phases.iter().map(|(p, ms)| PartMs { part: p.label(), ms: ms / n }).collect();
        out.push(PartMs {
            part: "oracles' read-out (rdma resource, rxe trace)",
            ms: self.readout_ms / n,
        });
        out.push(PartMs { part: "lab restarts after a VM was lost", ms: self.healing_ms / n });
        out.push(PartMs {
            part: "fuzzer (batch file, check, consoles, leak bisection)",
            ms: self.fuzzer_ms / n,
        });
        out
    }
}

/// Writes `bytes` to `path` whole or not at all.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    Ok(dissector::capture::write_whole(path, |w| w.write_all(bytes))?)
}

/// Where a fuzzing run writes: `batches/` (the last batch's file and capture),
/// `findings/<oracle>-<n>/` (each finding's scenario and capture).
fn dirs(out: &Path) -> (PathBuf, PathBuf) {
    (out.join("batches"), out.join("findings"))
}

/// Reads what is new on both VMs' consoles.
struct Consoles {
    paths: Option<lab::state::LabPaths>,
    watch: Option<lab::state::KernelWatch>,
    /// The VM reported a crash (BUG, Oops, KASAN): the Oops and panic that
    /// follow it, read now or later, say again what it said.
    crashed: [bool; 2],
}

impl Consoles {
    fn new(eps: &Endpoints) -> Consoles {
        let paths = match eps {
            Endpoints::Lab(l) => Some(l.paths.clone()),
            Endpoints::Remote(_) => None,
        };
        // What the consoles said before this run is not its finding.
        let watch = paths.as_ref().map(lab::state::KernelWatch::from_end);
        Consoles { paths, watch, crashed: [false; 2] }
    }

    /// Kernel reports since the last call (each with where it happened, `at
    /// rxe_mr_copy+0x49/0x1a0 [rdma_rxe]`, when the report says), less the
    /// Oops and panic that follow a crash already reported.
    fn reports(&mut self) -> Vec<lab::state::KernelSaid> {
        use lab::state::KernelReport::{Bug, Kasan, Oops, Panic};
        let Some(watch) = &mut self.watch else { return Vec::new() };
        let mut out = watch.reports();
        out.retain(|k| {
            let crashed = &mut self.crashed[k.vm.index()];
            let again = matches!(k.kind, Oops | Panic) && *crashed;
            *crashed |= matches!(k.kind, Bug | Kasan | Oops);
            !again
        });
        out
    }

    /// The VMs were brought back: new consoles, new kernels.
    fn restarted(&mut self) {
        if let Some(w) = &mut self.watch {
            w.restarted();
        }
        self.crashed = [false; 2];
    }
}

fn resource_counts(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for w in words.windows(2) {
            if let (Ok(n), true) =
                (w[1].parse::<u64>(), w[0].chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            {
                *out.entry(w[0].to_string()).or_default() += n;
            }
        }
    }
    out
}

/// The kinds that grew from `before` to `after`: `qp 5 (was 4)`.
/// The agents' own objects, which come and go with them (a batch's agents are
/// stopped when it ends): not what a scenario leaks.
const AGENT_OWN: [&str; 2] = ["ctx", "pd"];

fn grown(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> Vec<String> {
    after
        .iter()
        .filter(|(k, _)| !AGENT_OWN.contains(&k.as_str()))
        .filter_map(|(k, &n)| {
            let was = before.get(k).copied().unwrap_or(0);
            (n > was).then(|| format!("{k} {n} (was {was})"))
        })
        .collect()
}

/// A console line with what changes from run to run taken out: its timestamp,
/// addresses and offsets, PIDs and CPU numbers.
fn stable_line(line: &str) -> String {
    let l = lab::state::without_timestamp(line);
    let mut out = String::new();
    for word in l.split_whitespace() {
        let w = word.trim_end_matches([',', ':']);
        let numeric = w.starts_with("0x")
            || (w.len() >= 8 && w.chars().all(|c| c.is_ascii_hexdigit()))
            || w.chars().all(|c| c.is_ascii_digit());
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(if numeric { "N" } else { word });
    }
    out
}

/// How the lab says a VM was lost (it died, hung, or its NIC stopped).
const VM_LOST: [&str; 5] = [
    "stopped answering",
    "qemu exited",
    "NIC stopped transmitting",
    "control port closed",
    "is not usable",
];

/// The signature of a probe answered where IBA says nothing answers it: what
/// was sent, with its changes, and IBA's reason.
fn answered_signature(p: &gen::ProbeGen) -> String {
    format!(
        "{} answered where IBA says nothing does: {}",
        p.describe()
            .replace(&format!(" at {}", p.target.qp()), &format!(" at {}", p.target.describe())),
        p.silent.unwrap_or_default()
    )
}

/// What the oracles see in one run of a batch; `Err` (why) for a run the
/// harness could not carry out, which says nothing of the device.
fn sightings(
    batch: &Batch,
    keep: &[usize],
    r: &ScenarioResult,
    kernel: &[lab::state::KernelSaid],
    lost: Option<&str>,
) -> Result<Vec<Sighting>, String> {
    let mut out = Vec::new();
    for k in kernel {
        out.push(Sighting {
            oracle: Oracle::Kernel,
            signature: format!("{} on VM {}: {}", k.kind.name(), k.vm.name(), stable_line(&k.line)),
            detail: k.line.clone(),
        });
    }
    if let Some(e) = &r.error {
        // A run not carried out: what was collected is partial, so only a VM
        // that died or stopped answering says something of the device (the
        // lab's own words say which, or the console did above); anything else
        // is the harness's.
        let first = e.lines().next().unwrap_or(e);
        let lost_vm = lost.or_else(|| VM_LOST.iter().any(|m| e.contains(m)).then_some(first));
        match lost_vm {
            None if kernel.is_empty() => return Err(first.to_string()),
            Some(why) if kernel.is_empty() => out.push(Sighting {
                oracle: Oracle::Liveness,
                signature: format!("a VM was lost: {}", stable_line(why)),
                detail: format!("{why}\n{e}"),
            }),
            _ => {}
        }
        return Ok(out);
    }
    // A VM lost after the run was carried out (nothing failed in it): still
    // the device's.
    if let (Some(why), true) = (lost, kernel.is_empty()) {
        out.push(Sighting {
            oracle: Oracle::Liveness,
            signature: format!("a VM was lost: {}", stable_line(why)),
            detail: why.to_string(),
        });
    }
    let by_id: BTreeMap<&str, &gen::ProbeGen> =
        keep.iter().filter_map(|&i| batch.probes.get(i)).map(|p| (p.id.as_str(), p)).collect();
    for v in r.verdicts.iter().filter(|v| !v.held()) {
        let sighting = match v.kind {
            VerdictKind::Probe => {
                let id = v.what.strip_prefix("probe ").unwrap_or(&v.what);
                let Some(p) = by_id.get(id) else { continue };
                Sighting {
                    oracle: Oracle::Protocol,
                    signature: answered_signature(p),
                    detail: format!("{}: {}; {}", v.what, p.describe(), v.actual),
                }
            }
            VerdictKind::Memory if v.what.starts_with("memory of MR dst on b") => Sighting {
                oracle: Oracle::Liveness,
                signature: "the WRITE on a fresh QP after the batch did not land".into(),
                detail: format!("{}: {}", v.what, v.actual),
            },
            VerdictKind::Memory
                if v.what.starts_with("memory outside ")
                    || v.what.starts_with("memory of MR locked on b")
                    || v.what.ends_with(crate::judge::probes::ACKNOWLEDGED_WRITES) =>
            {
                Sighting {
                    oracle: Oracle::Memory,
                    signature: v.what.clone(),
                    detail: format!("{}: expected {}, found {}", v.what, v.expected, v.actual),
                }
            }
            VerdictKind::Wire if v.what == "wire of QP fresh from a" => Sighting {
                oracle: Oracle::Protocol,
                signature: "the WRITE on a fresh QP after the batch, or its ACK, was out of sequence on the wire".into(),
                detail: format!("{}: expected {}, found {}", v.what, v.expected, v.actual),
            },
            VerdictKind::Completion if v.what == "completion of wr_id 99 on a" => Sighting {
                oracle: Oracle::Liveness,
                signature: "the WRITE on a fresh QP after the batch did not complete".into(),
                detail: format!("{}: expected {}, found {}", v.what, v.expected, v.actual),
            },
            // A requester batch's own operations may fail, as the switch made
            // them: its oracle reads them below.
            _ => continue,
        };
        if !out.iter().any(|s: &Sighting| s.signature == sighting.signature) {
            out.push(sighting);
        }
    }
    if let Some(req) = &batch.requester {
        req.sightings(keep, r, &mut out);
    }
    out.extend(device_said(r));
    Ok(out)
}

/// What the devices said of themselves over a run (all a real host, whose
/// kernel is not read, has in place of the kernel oracle): an async event of
/// the device or port rather than of a QP (a QP's errors are a probe's
/// legitimate doing), and counters that went back (the device was reset).
fn device_said(r: &ScenarioResult) -> Vec<Sighting> {
    let mut out = Vec::new();
    for (ep, events) in &r.events {
        let mut kinds: Vec<EventType> = Vec::new();
        for k in events.iter().map(|e| e.kind).filter(|k| EventType::OF_THE_DEVICE.contains(k)) {
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        for k in kinds {
            out.push(Sighting {
                oracle: Oracle::Liveness,
                signature: format!("the device at {ep} reported {k}"),
                detail: format!("endpoint {ep}'s async events: {k}"),
            });
        }
    }
    for (ep, c) in r.counters.iter().filter(|(_, c)| !c.reset.is_empty()) {
        out.push(Sighting {
            oracle: Oracle::Liveness,
            signature: format!("the device at {ep} was reset: its counters went back"),
            detail: format!(
                "{} port {} at {ep}: {} went back",
                c.device,
                c.port,
                c.reset.join(", ")
            ),
        });
    }
    out
}

/// At most this many batch runs go between two read-outs of the VMs (their
/// verbs objects for the leak check, rxe's trace for coverage): a read-out is a
/// command in each VM, 100–300 ms under TCG, longer than a batch's probes. A run
/// minimisation asks about is read at once, and the runs before a new sighting
/// is settled.
const READ_EVERY: usize = 8;

/// Whether the VMs are read out right after a run, or with later runs'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Now,
    Later,
}

/// Runs the probes `keep` of `batch` once: the result, where its file and
/// capture are, and what the consoles said meanwhile.
struct Runner<'a> {
    plan: &'a FuzzPlan,
    consoles: Consoles,
    work: PathBuf,
    /// The most of each kind of verbs object the VMs' devices held after a run
    /// (none before the first).
    held: [Option<BTreeMap<String, u64>>; 2],
    /// What the VMs' kernels traced of rdma_rxe.
    coverage: trace::Coverage,
    /// The agents, kept from one batch to the next: started once a run (and
    /// again after the lab was brought back), not per batch.
    agents: controller::AgentPool,
    /// The runs since the VMs were last read out, in order.
    unread: Vec<Unread>,
    /// How long bringing the lab back (after a VM was lost) has taken in all.
    healing_ms: f64,
}

/// A run the VMs have not been read out after yet.
struct Unread {
    batch: Batch,
    keep: Vec<usize>,
    text: String,
    result: ScenarioResult,
}

struct Ran {
    result: ScenarioResult,
    sightings: Vec<Sighting>,
    /// The read-out of the VMs after it, when there was one.
    read: Option<ReadOut>,
}

/// What the VMs said when read out after a run.
#[derive(Default)]
struct ReadOut {
    /// The rxe code the runs since the last read-out reached that none before
    /// them had.
    gain: trace::Gain,
    ms: f64,
    /// Those runs' batches, in order.
    batches: Vec<Batch>,
    /// Verbs objects one of them left behind, with the run that leaves them
    /// behind again on its own (found by running each again), or the last.
    leaks: Vec<Seen>,
    /// Whether that run is the last (the one just run).
    leak_in_last: bool,
    /// What the bisection's runs showed besides (a crash, say), each with its
    /// run: not lost for having been seen there.
    besides: Vec<Seen>,
}

impl Runner<'_> {
    /// Runs `text`, the scenario of the items `keep` of `batch` (as
    /// [`batch_text`] writes it, or with less setup), as file `name`.toml; the
    /// VMs are read out after it as `read` says.
    fn run(
        &mut self,
        batch: &Batch,
        keep: &[usize],
        text: &str,
        name: &str,
        read: Read,
    ) -> Result<Ran> {
        let (result, mut sightings, lost) = self.execute(batch, keep, text, name)?;
        if lost {
            return Ok(Ran { result, sightings, read: None });
        }
        self.unread.push(Unread {
            batch: batch.clone(),
            keep: keep.to_vec(),
            text: text.to_string(),
            result: result.clone(),
        });
        if read == Read::Later && self.unread.len() < READ_EVERY {
            return Ok(Ran { result, sightings, read: None });
        }
        let mut out = self.read_out();
        // A leak of this run is among its own sightings.
        if out.leak_in_last {
            sightings.extend(std::mem::take(&mut out.leaks).into_iter().map(|l| l.sighting));
        }
        Ok(Ran { result, sightings, read: Some(out) })
    }

    /// Reads the VMs out after the runs not read yet (at the end of fuzzing).
    fn flush(&mut self) -> Option<ReadOut> {
        (!self.unread.is_empty()).then(|| self.read_out())
    }

    /// Runs the scenario and reads what the run did not say itself: the
    /// kernel's reports, and whether a VM was lost (the lab is brought back).
    fn execute(
        &mut self,
        batch: &Batch,
        keep: &[usize],
        text: &str,
        name: &str,
    ) -> Result<(ScenarioResult, Vec<Sighting>, bool)> {
        let file = self.work.join(format!("{name}.toml"));
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
        let sc = crate::scenario::check::parse_str(&file, text).map_err(|e| {
            anyhow::anyhow!("the fuzzer drew a batch `roce check` refuses (a fuzzer bug): {}", e[0])
        })?;
        let plan = RunPlan {
            endpoints: self.plan.endpoints.clone(),
            wire: WireSource::Switch,
            at_agents: false,
            out_dir: self.work.clone(),
            profile: None,
            jobs: 1,
            crashes: Default::default(),
            snapshots: None,
        };
        let ran =
            controller::run_all_in(&plan, &self.agents, &[(file.clone(), sc)], |_, _| Ok(()))?;
        let result = ran
            .report
            .scenarios
            .into_iter()
            .next()
            .ok_or_else(|| anyhow::anyhow!("the run of {} gave no result", file.display()))?;
        let kernel = self.consoles.reports();
        let t = Instant::now();
        // A VM lost in this run: the lab is brought back for the next one.
        let lost = controller::heal_if_broken(&self.plan.endpoints, &self.agents)
            .context("bringing the lab back after a VM was lost")?;
        if lost.is_some() {
            // The restarted VMs' consoles start again; their agents are new,
            // their kernels trace nothing yet, and what the runs before this
            // one left in them is gone unread.
            self.consoles.restarted();
            self.held = [None, None];
            self.coverage.restart();
            self.unread.clear();
            self.healing_ms += t.elapsed().as_secs_f64() * 1000.0;
        }
        let sightings = sightings(batch, keep, &result, &kernel, lost.as_deref())
            .map_err(|why| anyhow::anyhow!("not carried out: {why}"))?;
        Ok((result, sightings, lost.is_some()))
    }

    /// Reads the VMs out after the runs not read yet: what rxe code they
    /// reached, and whether they left verbs objects behind. A leak after
    /// several runs is bisected: each is run again alone, read after, and the
    /// first to leak again is the leak's run.
    fn read_out(&mut self) -> ReadOut {
        let runs = std::mem::take(&mut self.unread);
        let t = Instant::now();
        let (grown, gain) = self.resources_and_trace();
        let mut out = ReadOut {
            gain,
            ms: t.elapsed().as_secs_f64() * 1000.0,
            batches: runs.iter().map(|u| u.batch.clone()).collect(),
            leaks: Vec::new(),
            leak_in_last: false,
            besides: Vec::new(),
        };
        let Some(last) = runs.last().filter(|_| !grown.is_empty()) else { return out };
        let mut found = None;
        if runs.len() > 1 {
            for (i, u) in runs.iter().enumerate() {
                let Ok((result, besides, lost)) =
                    self.execute(&u.batch, &u.keep, &u.text, "bisect")
                else {
                    continue;
                };
                out.besides.extend(besides.into_iter().map(|s| Seen {
                    sighting: s,
                    result: result.clone(),
                    batch: u.batch.clone(),
                    keep: u.keep.clone(),
                }));
                if lost {
                    break;
                }
                let (again, _) = self.resources_and_trace();
                if !again.is_empty() {
                    found = Some((i, result, again));
                    break;
                }
            }
        }
        let (at, result, sightings) = match found {
            Some(f) => f,
            None => (runs.len() - 1, last.result.clone(), grown),
        };
        out.leak_in_last = at + 1 == runs.len();
        let u = &runs[at];
        out.leaks = sightings
            .into_iter()
            .map(|s| Seen {
                sighting: s,
                result: result.clone(),
                batch: u.batch.clone(),
                keep: u.keep.clone(),
            })
            .collect();
        out
    }

    /// Liveness: the agents tore down what the scenarios made, so the devices
    /// hold no more than before them. Asked of both VMs at once, with what their
    /// kernels traced of rxe: the kinds that grew, and the coverage gained.
    fn resources_and_trace(&mut self) -> (Vec<Sighting>, trace::Gain) {
        let (said, gain) =
            self.coverage.read_with(self.consoles.paths.as_ref(), "rdma resource show");
        let now = said.map(|out| out.map(|o| resource_counts(&o)));
        let mut sightings = Vec::new();
        for vm in lab::state::Vm::BOTH {
            if let (Some(before), Some(after)) = (&self.held[vm.index()], &now[vm.index()]) {
                let more = grown(before, after);
                if !more.is_empty() {
                    let kinds: Vec<&str> =
                        more.iter().filter_map(|m| m.split(' ').next()).collect();
                    sightings.push(Sighting {
                        oracle: Oracle::Liveness,
                        signature: format!(
                            "VM {} holds more verbs objects after the run: {}",
                            vm.name(),
                            kinds.join(", ")
                        ),
                        detail: format!("rdma resource on VM {}: {}", vm.name(), more.join(", ")),
                    });
                }
            }
        }
        // The most each kind has reached (none before the first run, nor after
        // the lab was brought back).
        for (held, now) in self.held.iter_mut().zip(now) {
            match (held.as_mut(), now) {
                (Some(h), Some(n)) => n.into_iter().for_each(|(k, v)| {
                    let e = h.entry(k).or_default();
                    *e = (*e).max(v);
                }),
                (None, n) => *held = n,
                (Some(_), None) => {}
            }
        }
        (sightings, gain)
    }
}

/// The scenario of the items `keep` of `batch`, as a batch run has it.
fn batch_text(batch: &Batch, keep: &[usize]) -> String {
    batch.toml(keep, &format!("roce fuzz: batch {} of seed {}", batch.index, batch.seed))
}

/// Fuzzes as `plan` says, writing under `out`; `progress` hears after each batch.
pub(crate) fn fuzz(
    plan: &FuzzPlan,
    out: &Path,
    mut progress: impl FnMut(&FuzzReport, &[Finding]),
) -> Result<FuzzReport> {
    let (work, found_dir) = dirs(out);
    for d in [&work, &found_dir] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let start = Instant::now();
    let all = gen::all_cells();
    let mut reached = BTreeSet::new();
    let mut report = FuzzReport {
        seed: plan.seed,
        corpus_messages: plan.corpus.messages.len(),
        corpus_files: plan.corpus.files.iter().map(|f| f.display().to_string()).collect(),
        batches: 0,
        executions: 0,
        elapsed_s: 0.0,
        minimise_s: 0.0,
        executions_per_s: 0.0,
        cells_total: all.len(),
        cells_reached: 0,
        unreached: Vec::new(),
        findings: Vec::new(),
        not_run: Vec::new(),
        resources_counted: false,
        avoided: 0,
        rxe: RxeCoverage { guided: plan.guided, ..RxeCoverage::default() },
        batch_ms: Vec::new(),
    };
    let mut time = BatchTime::default();
    let consoles = Consoles::new(&plan.endpoints);
    let coverage = trace::Coverage::start(consoles.paths.as_ref());
    report.rxe.off = coverage.off.clone();
    report.rxe.traceable = coverage.traceable;
    let mut runner = Runner {
        plan,
        consoles,
        work,
        held: [None, None],
        coverage,
        agents: controller::AgentPool::default(),
        unread: Vec::new(),
        healing_ms: 0.0,
    };
    // The batches that reached rxe code no batch before them had.
    let mut kept: Vec<Batch> = Vec::new();
    let mut found =
        Found { plan, found_dir: &found_dir, seen: BTreeSet::new(), crashes: Vec::new() };
    let stop = crate::net::live::ctrl_c_flag();
    let mut failed_in_a_row = 0;
    let mut index = 0u64;
    loop {
        if plan.budget.is_some_and(|b| index >= b)
            || plan.duration.is_some_and(|d| start.elapsed() >= d)
            || stop.load(std::sync::atomic::Ordering::Relaxed)
        {
            break;
        }
        // Guided, one batch in two is drawn from a kept one (its own stream,
        // from the seed and the index).
        let mut guide = lab::fault::Rng::new(plan.seed ^ index.wrapping_mul(GUIDE_MIX));
        let parent = (plan.guided && !kept.is_empty() && guide.next_f64() < 0.5)
            .then(|| &kept[(guide.next_u64() % kept.len() as u64) as usize]);
        let drawn = match parent {
            Some(p) => {
                report.rxe.drawn_from_kept += 1;
                p.mutate(&mut guide, index)
            }
            None => Batch::generate_from(plan.seed, index, plan.batch, &plan.corpus),
        };
        let batch = Batch { plant: plan.plant, ..drawn };
        index += 1;
        let keep = avoiding(&batch, &found.crashes);
        report.avoided += (batch.items() - keep.len()) as u64;
        let t = Instant::now();
        let healed = runner.healing_ms;
        let text = batch_text(&batch, &keep);
        let ran = match runner.run(&batch, &keep, &text, "batch", Read::Later) {
            Ok(r) => {
                failed_in_a_row = 0;
                time.add(&r, t.elapsed(), runner.healing_ms - healed);
                r
            }
            Err(e) => {
                report.not_run.push(format!("batch {}: {e:#}", batch.index));
                failed_in_a_row += 1;
                if failed_in_a_row >= MAX_NOT_RUN_IN_A_ROW {
                    anyhow::bail!(
                        "{failed_in_a_row} batches in a row could not be carried out (the last: {e:#}); stopped, with what was found so far in {}",
                        out.display()
                    );
                }
                continue;
            }
        };
        report.batches += 1;
        report.resources_counted = runner.held.iter().all(Option::is_some);
        report.executions += match &batch.requester {
            Some(r) => keep.iter().filter(|&&i| i >= r.faults.len()).count() as u64,
            None => keep.len() as u64,
        };
        reached.extend(batch.cells().into_iter().filter(|c| all.contains(c)));
        let before = report.findings.len();
        // What the batch showed, and a leak of the runs read out with it.
        let mut pending: VecDeque<Seen> = ran
            .sightings
            .iter()
            .map(|s| Seen {
                sighting: s.clone(),
                result: ran.result.clone(),
                batch: batch.clone(),
                keep: keep.clone(),
            })
            .collect();
        // Settling a new sighting runs the lab again: the runs so far are
        // read out first, so none of theirs is taken for the settling runs'.
        let new = pending.iter().any(|p| !found.seen.contains(&p.sighting.signature));
        if let Some(read) = ran.read.or_else(|| new.then(|| runner.flush()).flatten()) {
            pending.extend(took_in(&mut report, &mut kept, &runner.coverage, read, start));
        }
        found.settle_all(&mut runner, &mut report, pending)?;
        report.elapsed_s = start.elapsed().as_secs_f64();
        let fuzzing = (report.elapsed_s - report.minimise_s).max(1e-3);
        report.executions_per_s = report.executions as f64 / fuzzing;
        report.cells_reached = reached.len();
        report.batch_ms = time.means();
        progress(&report, &report.findings[before..]);
    }
    // The last runs, not read out yet.
    if let Some(read) = runner.flush() {
        let leaks = took_in(&mut report, &mut kept, &runner.coverage, read, start);
        found.settle_all(&mut runner, &mut report, leaks.into())?;
    }
    report.elapsed_s = start.elapsed().as_secs_f64();
    report.unreached = all
        .difference(&reached)
        .map(|(op, class, t)| format!("{op} / {} / {}", class.name(), t.describe()))
        .collect();
    report.cells_reached = reached.len();
    report.rxe.reached = runner.coverage.functions.iter().cloned().collect();
    let json = serde_json::to_string_pretty(&report)?;
    write_whole(&out.join("fuzz.json"), json.as_bytes())?;
    write_whole(&out.join("findings.html"), findings_page(&report).as_bytes())?;
    Ok(report)
}

/// Takes in a read-out of the VMs: the batches that reached new rxe code are
/// kept, the coverage is reported; returns what it saw (a leak, and what its
/// bisection's runs showed besides), to settle.
fn took_in(
    report: &mut FuzzReport,
    kept: &mut Vec<Batch>,
    cov: &trace::Coverage,
    read: ReadOut,
    start: Instant,
) -> Vec<Seen> {
    // Which of the runs read out together reached it is not known: each is kept.
    if read.gain.any() {
        kept.extend(read.batches);
    }
    report.rxe.kept = kept.len();
    report.rxe.functions = cov.functions.len();
    report.rxe.edges = cov.edges.len();
    report.rxe.overrun = cov.overrun;
    report.rxe.off = cov.off.clone();
    if cov.off.is_none() {
        report.rxe.over_time.push((start.elapsed().as_secs_f64(), cov.functions.len()));
    }
    read.leaks.into_iter().chain(read.besides).collect()
}

/// What a fuzzing run has found so far, and how to settle what it sees next.
struct Found<'a> {
    plan: &'a FuzzPlan,
    found_dir: &'a Path,
    /// Every signature seen (settled or being settled).
    seen: BTreeSet<String>,
    /// Each known crash's reproducer.
    crashes: Vec<Reproducer>,
}

impl Found<'_> {
    /// Settles each new sighting into a finding, then what its minimisation's
    /// runs showed besides (a subset of the batch can show another fault: a
    /// crash the whole batch does not reach), each from the probes it was seen with.
    fn settle_all(
        &mut self,
        runner: &mut Runner<'_>,
        report: &mut FuzzReport,
        mut pending: VecDeque<Seen>,
    ) -> Result<()> {
        while let Some(p) = pending.pop_front() {
            if !self.seen.insert(p.sighting.signature.clone()) {
                continue;
            }
            let t = Instant::now();
            let n = report.findings.len();
            let (f, also, minimised) = settle(runner, self.plan, &p, self.found_dir, n)?;
            report.minimise_s += t.elapsed().as_secs_f64();
            if f.oracle == Oracle::Kernel && f.confirmed && !f.probes.is_empty() {
                self.crashes.push(minimised);
            }
            // Minimised to fewer changes, it is known by that signature too.
            self.seen.insert(f.signature.clone());
            report.findings.push(f);
            pending.extend(also);
        }
        Ok(())
    }
}

/// A batch's scenario as a finding's: named for what it found (one name per
/// finding, as a profile keys it). Its expectations stay IBA's answers, so
/// `roce run` of it fails while the fault is there.
fn as_finding(text: &str, name: &str, note: Option<&str>) -> Result<String> {
    let mut doc: toml_edit::DocumentMut =
        text.parse().context("the fuzzer wrote a batch that is not TOML (a fuzzer bug)")?;
    doc["name"] = toml_edit::value(name);
    let text = doc.to_string();
    let Some(note) = note else { return Ok(text) };
    // The note goes last in the header: after its comment lines, before the first key.
    let header: usize = text.lines().take_while(|l| l.starts_with('#')).map(|l| l.len() + 1).sum();
    let (head, rest) = text.split_at(header.min(text.len()));
    Ok(format!("{head}# {}\n{rest}", note.replace('\n', " ")))
}

/// The items of `batch` to run: all of them but, for each known crash (its
/// minimised items in the batch it was minimised in) the batch repeats every
/// item of, the first of those, so the crash is not run again.
fn avoiding(batch: &Batch, crashes: &[Reproducer]) -> Vec<usize> {
    let mut out: Vec<usize> = (0..batch.items()).collect();
    for (crashed, items) in crashes {
        let at: Vec<Option<usize>> = items
            .iter()
            .map(|&j| out.iter().copied().find(|&i| batch.repeats(i, crashed, j)))
            .collect();
        if let Some(Some(first)) = at.first().copied().filter(|_| at.iter().all(Option::is_some)) {
            out.retain(|&i| i != first);
        }
    }
    out
}

/// A minimised finding's items: the batch it was minimised in (its probes'
/// changes as minimisation left them) and the items kept of it.
type Reproducer = (Batch, Vec<usize>);

/// A sighting to settle: what showed it, in which batch (its probes as that
/// run had them), with which of its items.
struct Seen {
    sighting: Sighting,
    result: ScenarioResult,
    batch: Batch,
    keep: Vec<usize>,
}

/// A new sighting becomes a finding: run again (confirmed or not), then
/// minimised to the fewest probes that still show it, written as a scenario.
fn settle(
    runner: &mut Runner<'_>,
    plan: &FuzzPlan,
    seen_in: &Seen,
    found_dir: &Path,
    n: usize,
) -> Result<(Finding, Vec<Seen>, Reproducer)> {
    let s = &seen_in.sighting;
    let all = seen_in.keep.clone();
    let mut runs = 0usize;
    let mut last = seen_in.result.clone();
    let mut also: Vec<Seen> = Vec::new();
    let mut shows =
        |runner: &mut Runner<'_>, batch: &Batch, keep: &[usize], text: &str, sig: &str| -> bool {
            runs += 1;
            let Ok(r) = runner.run(batch, keep, text, "minimise", Read::Now) else { return false };
            for x in r.sightings.iter().filter(|x| x.signature != sig) {
                if !also.iter().any(|a| a.sighting.signature == x.signature) {
                    also.push(Seen {
                        sighting: x.clone(),
                        result: r.result.clone(),
                        batch: batch.clone(),
                        keep: keep.to_vec(),
                    });
                }
            }
            let shown = r.sightings.iter().any(|x| x.signature == sig);
            if shown {
                last = r.result;
                // The next run writes over its capture: keep this one's.
                if let Some(c) = last.capture.as_ref().map(PathBuf::from) {
                    let kept = runner.work.join("reproduced.pcapng");
                    last.capture =
                        std::fs::copy(&c, &kept).ok().map(|_| kept.display().to_string());
                }
            }
            shown
        };
    let mut batch = seen_in.batch.clone();
    let mut shown = Shown { runs: 1, of: 1 };
    if plan.minimise {
        for _ in 0..CONFIRM_RUNS {
            shown.of += 1;
            let text = batch_text(&batch, &all);
            shown.runs += u32::from(shows(runner, &batch, &all, &text, &s.signature));
        }
    }
    let confirmed = shown.runs > 1;
    // An intermittent finding is asked several times before a smaller batch is
    // said not to show it; a steady one, once.
    let repeats = if shown.steady() { 1 } else { CONFIRM_RUNS };
    let mut again =
        |runner: &mut Runner<'_>, batch: &Batch, keep: &[usize], text: &str, sig: &str| {
            (0..repeats).any(|_| shows(runner, batch, keep, text, sig))
        };
    let keep = if confirmed {
        minimise::ddmin(all.clone(), MINIMISE_RUNS, |k| {
            again(runner, &batch, k, &batch_text(&batch, k), &s.signature)
        })
    } else {
        all.clone()
    };
    // Then the fields: each kept probe's changes undone one at a time; a change
    // the finding shows without stays undone. A probe answered where nothing
    // may answer it is still that finding with fewer changes, under the
    // signature that names them.
    // The signature as the last run that showed it said it.
    let mut sig = s.signature.clone();
    if confirmed {
        let mut tries = 0;
        for &i in &keep {
            let undoable = batch.probes.get(i).map(gen::ProbeGen::undoable).unwrap_or_default();
            for c in undoable {
                if tries == FIELD_RUNS {
                    break;
                }
                tries += 1;
                let mut tried = batch.clone();
                tried.probes[i] = batch.probes[i].without(c);
                let about_it = sig == answered_signature(&batch.probes[i]);
                let want =
                    if about_it { answered_signature(&tried.probes[i]) } else { sig.clone() };
                if again(runner, &tried, &keep, &batch_text(&tried, &keep), &want) {
                    batch = tried;
                    sig = want;
                }
            }
        }
    }
    let title =
        format!("Finding {} ({} oracle, {}): {}", n + 1, s.oracle.name(), shown.describe(), sig);
    let whole = batch.toml(&keep, &title);
    // Then the setup: the batch's tables the finding shows without (its
    // objects, steps and expectations), each set tried once the checker takes it.
    let (text, setup_left_out) = if confirmed {
        let tables = setup::Setup::new(&whole, |path, t| batch.about(&keep, path, t))?;
        let file = runner.work.join("setup.toml");
        let checks = |t: &str| crate::scenario::check::parse_str(&file, t).is_ok();
        let kept = minimise::ddmin(tables.candidates(), SETUP_RUNS, |k| {
            let t = tables.text(k);
            checks(&t) && again(runner, &batch, &keep, &t, &sig)
        });
        let text = setup::without_needless_requires(&file, &tables.text(&kept));
        (text, Some(tables.left_out(&kept)))
    } else {
        (whole, None)
    };
    let dir = found_dir.join(format!("{}-{}", s.oracle.name(), n + 1));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let scenario = dir.join("finding.toml");
    let name = format!("fuzz seed {} batch {}: {}", batch.seed, batch.index, sig);
    let note =
        setup_left_out.as_ref().map(|l| format!("Left out of the batch's setup, not needed: {l}."));
    write_whole(&scenario, as_finding(&text, &name, note.as_deref())?.as_bytes())?;
    let capture = match last.capture.as_ref().map(PathBuf::from) {
        Some(c) if c.exists() => {
            let to = dir.join("finding.pcapng");
            std::fs::copy(&c, &to).with_context(|| format!("copying {}", c.display()))?;
            Some(to)
        }
        _ => None,
    };
    last.name = name.clone();
    last.file = scenario.display().to_string();
    last.capture = capture.as_ref().map(|c| c.display().to_string());
    let finding = Finding {
        oracle: s.oracle,
        signature: sig,
        detail: s.detail.clone(),
        batch: batch.index,
        probes: keep.iter().map(|&i| batch.describe(i)).collect(),
        confirmed,
        shown,
        intermittent: shown.intermittent(),
        reproducer: if s.oracle == Oracle::Kernel {
            c_reproducer(&scenario)?
        } else {
            Err("not a kernel finding".into())
        },
        scenario,
        capture,
        setup_left_out,
        minimise_runs: runs,
        run: last,
    };
    Ok((finding, also, (batch, keep)))
}

fn path_or_null<S: serde::Serializer>(
    r: &Result<PathBuf, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    r.as_ref().ok().serialize(s)
}

/// A kernel finding's C reproducer, written beside its scenario: for upstream, who
/// run no `roce`. A finding whose steps have no C form yet has none, and says why.
fn c_reproducer(scenario: &Path) -> Result<Result<PathBuf, String>> {
    let loaded = crate::scenario::load_all(&[scenario.to_path_buf()])
        .map_err(|d| anyhow::anyhow!("{}: the finding does not load: {d:?}", scenario.display()))?;
    let Some((_, sc)) = loaded.first() else { return Ok(Err("no scenario".into())) };
    match crate::repro::c_program(sc, &scenario.display().to_string()) {
        Ok(c) => {
            let to = scenario.with_file_name("repro.c");
            write_whole(&to, c.as_bytes())?;
            Ok(Ok(to))
        }
        Err(e) => Ok(Err(e)),
    }
}

/// The findings as a page: what the run did, then each finding's reproducing
/// run with the ladder of its exchange.
fn findings_page(r: &FuzzReport) -> String {
    let lines = [
        format!(
            "seed {}: {} batches, {} executions in {:.0} s ({:.0} s of it minimising), {:.2} executions/s",
            r.seed, r.batches, r.executions, r.elapsed_s, r.minimise_s, r.executions_per_s
        ),
        format!(
            "coverage: {} of {} cells (opcode × change × QP) reached",
            r.cells_reached, r.cells_total
        ),
        format!("{} findings; each is reproduced by its finding.toml (`roce run`)", r.findings.len()),
    ];
    let runs: Vec<ScenarioResult> = r.findings.iter().map(|f| f.run.clone()).collect();
    let report = crate::results::Report::new(runs, r.elapsed_s, None);
    crate::render::html::render_findings(
        &format!("roce fuzz --seed {}", r.seed),
        &lines,
        &report,
        None,
    )
    .0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Verdict;

    /// Each oracle's fault, planted in a run's result, is its finding: with the
    /// signature that stays the same from run to run.
    #[test]
    fn each_oracle_finds_its_fault() {
        let batch = (0..100)
            .map(|i| Batch::generate(9, i, 16))
            .find(|b| b.probes.iter().any(|p| p.silent.is_some() && p.target == gen::Target::RcErr))
            .expect("a batch with a probe at the QP in ERR");
        let keep: Vec<usize> = (0..batch.probes.len()).collect();
        let p = batch.probes.iter().find(|p| p.target == gen::Target::RcErr).unwrap();
        let mut r = ScenarioResult::not_run("x", Path::new("x.toml"), vec![], "");
        r.error = None;
        let v =
            |kind, what: &str, pass| Verdict::new(kind, what.into(), pass, "e".into(), "a".into());
        r.verdicts = vec![
            v(VerdictKind::Memory, "memory outside MR target on b", false),
            v(VerdictKind::Memory, "memory of MR locked on b at offset 0", true),
            v(VerdictKind::Probe, &format!("probe {}", p.id), false),
            v(VerdictKind::Completion, "completion of wr_id 99 on a", false),
            v(
                VerdictKind::Memory,
                "memory of MR target on b: the probe WRITEs it acknowledged",
                false,
            ),
            v(VerdictKind::Wire, "wire of QP fresh from a", false),
        ];
        let oops = lab::state::KernelSaid {
            vm: lab::state::Vm::B,
            kind: lab::state::KernelReport::Bug,
            line: "BUG: kernel NULL pointer dereference, address: 0000000000000008".to_string(),
        };
        let s = sightings(&batch, &keep, &r, &[oops], None).expect("judged");
        let oracles: Vec<Oracle> = s.iter().map(|s| s.oracle).collect();
        assert_eq!(
            oracles,
            [
                Oracle::Kernel,
                Oracle::Memory,
                Oracle::Protocol,
                Oracle::Liveness,
                Oracle::Memory,
                Oracle::Protocol
            ],
            "{s:#?}"
        );
        // A PSN changed on the wire of the liveness WRITE, either way.
        assert!(s[5].signature.contains("out of sequence on the wire"), "{}", s[5].signature);
        // An acknowledged WRITE whose payload is not where it aimed: the memory
        // oracle's, known by the verdict (no offsets or bytes in the signature).
        assert_eq!(s[4].signature, "memory of MR target on b: the probe WRITEs it acknowledged");
        assert_eq!(s[0].signature, "BUG on VM b: BUG: kernel NULL pointer dereference, address: N");
        assert_eq!(s[1].signature, "memory outside MR target on b");
        assert!(
            s[2].signature.contains("at RC in ERR answered where IBA says nothing does"),
            "{}",
            s[2].signature
        );
        assert!(!s[2].signature.contains(&p.id), "no probe id in a signature: {}", s[2].signature);
        // Every verdict holding and quiet consoles: nothing.
        r.verdicts.iter_mut().for_each(|v| v.pass = true);
        assert!(sightings(&batch, &keep, &r, &[], None).expect("judged").is_empty());
        // A lost VM is a liveness finding (the verdicts of a run cut short are not
        // read); any other reason a run stopped is the harness's, not judged.
        r.verdicts[0].pass = false;
        r.error = Some("VM b stopped answering: no word from its agent for 30 s".into());
        let s = sightings(&batch, &keep, &r, &[], None).expect("judged");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].oracle, Oracle::Liveness);
        r.error = Some("step 3 (probe on a): endpoint a: sending a frame on eth0: Message too long (os error 90)".into());
        assert!(sightings(&batch, &keep, &r, &[], None).unwrap_err().contains("Message too long"));
    }

    /// A requester batch with all four operations (seed 4).
    fn full_requester_batch() -> Batch {
        (0..300)
            .map(|i| Batch::generate(4, i, 16))
            .find(|b| {
                b.requester.as_ref().is_some_and(|r| {
                    r.ops.iter().filter(|o| o.on_wire()).count() == 4 && r.ops.len() == 4
                })
            })
            .expect("a requester batch with all four operations")
    }

    /// A requester batch's scenario names itself in TOML's own quoting: a name
    /// with quotes, a backslash or a line break still loads as that name, and
    /// a header line with one stays a comment.
    #[test]
    fn a_requester_batch_quotes_its_name() {
        let b = full_requester_batch();
        let r = b.requester.as_ref().expect("a requester batch");
        let keep: Vec<usize> = (0..b.items()).collect();
        let name = "fuzz: \"quoted\" \\ name\non two lines";
        let mut doc = doc::Doc::new(["a \"title\"\nname = \"not a key\""]);
        doc.set("name", name);
        r.write(&keep, &mut doc);
        let text = doc.to_string();
        assert!(text.starts_with("# a \"title\" name = \"not a key\"\n"), "{text}");
        let sc = crate::scenario::check::parse_str(Path::new("r.toml"), &text)
            .unwrap_or_else(|e| panic!("{}\n{text}", e[0]));
        assert_eq!(sc.name, name);
        // So does a batch's title.
        let text = b.toml(&keep, "a title\n[[step]]");
        let sc = crate::scenario::check::parse_str(Path::new("r.toml"), &text)
            .unwrap_or_else(|e| panic!("{}\n{text}", e[0]));
        assert_eq!(sc.name, format!("fuzz: seed {} batch {}", b.seed, b.index));
    }

    /// A requester batch's oracle: a success whose memory is wrong, and a WR with
    /// no completion at all, are findings; a failure with its memory unwritten
    /// is what the switch did, not one.
    #[test]
    fn the_requester_oracle_reads_success_against_memory() {
        let batch = full_requester_batch();
        let req = batch.requester.as_ref().expect("a requester batch");
        // The operations alone: no rule of the switch's supplies an answer.
        let ops: Vec<usize> = (req.faults.len()..batch.items()).collect();
        let keep: Vec<usize> = (0..batch.items()).collect();
        let mut r = ScenarioResult::not_run("x", Path::new("x.toml"), vec![], "");
        r.error = None;
        let v = |kind, what: &str, pass, actual: &str| {
            Verdict::new(kind, what.into(), pass, "e".into(), actual.into())
        };
        r.verdicts = vec![
            // READ: success, buffer unwritten: the finding.
            v(VerdictKind::Completion, "completion of wr_id 2 on a", true, "IBV_WC_SUCCESS"),
            v(VerdictKind::Memory, "memory of MR rdst on a at offset 0", false, "00 00"),
            // WRITE: failed, memory unwritten: the switch's doing.
            v(
                VerdictKind::Completion,
                "completion of wr_id 1 on a",
                false,
                "IBV_WC_REM_ACCESS_ERR",
            ),
            v(VerdictKind::Memory, "memory of MR target on b at offset 0", false, "c3 c3"),
            // FetchAdd: never completed.
            v(
                VerdictKind::Completion,
                "completion of wr_id 3 on a",
                false,
                "no such completion (polled: none)",
            ),
            // SEND with Invalidate: success at a, b's receive in error.
            v(VerdictKind::Completion, "completion of wr_id 4 on a", false, "IBV_WC_SUCCESS"),
        ];
        r.observations = [
            ("completion a wr_id 1", "IBV_WC_REM_ACCESS_ERR"),
            ("completion a wr_id 2", "IBV_WC_SUCCESS"),
            ("completion a wr_id 4", "IBV_WC_SUCCESS"),
            ("completion b wr_id 14", "IBV_WC_REM_INV_REQ_ERR"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let s = sightings(&batch, &ops, &r, &[], None).expect("judged");
        let got: Vec<(Oracle, String)> =
            s.iter().map(|s| (s.oracle, s.signature.clone())).collect();
        let Some(requester::Op::SendInv(k)) = req.ops.last().copied() else {
            panic!("the SEND with Invalidate comes last: {:?}", req.ops)
        };
        assert_eq!(
            got,
            [
                (
                    Oracle::Protocol,
                    "the requester completed a READ successfully, but its memory does not show it"
                        .to_string()
                ),
                (Oracle::Liveness, "a FetchAdd never completed, successfully or not".to_string()),
                (
                    Oracle::Protocol,
                    format!(
                        "a SEND with Invalidate naming {} completed successfully at a while b's receive completed in error",
                        k.name()
                    )
                ),
                // And the READ's success came behind the WRITE's error, where
                // the send queue should have flushed it.
                (
                    Oracle::Protocol,
                    "a's READ completed successfully behind a's WRITE, which completed in error"
                        .to_string()
                ),
            ]
        );
        // Both ends agreeing is no finding; nor is an operation left out.
        r.observations.insert("completion b wr_id 14".into(), "IBV_WC_SUCCESS".into());
        let s = sightings(&batch, &ops, &r, &[], None).expect("judged");
        assert_eq!(s.len(), 3, "{s:?}");
        let s = sightings(&batch, &ops[..1], &r, &[], None).expect("judged");
        assert!(s.is_empty(), "{s:?}");
        // The batch loads with every subset of its rules and operations.
        for k in [keep.clone(), vec![], keep.iter().copied().take(1).collect()] {
            crate::scenario::check::parse_str(Path::new("r.toml"), &batch.toml(&k, "t"))
                .unwrap_or_else(|e| panic!("{}\n{}", e[0], batch.toml(&k, "t")));
        }
    }

    /// A finding's scenario loads, carries its own name, and keeps IBA's
    /// answers as plain expectations (it fails while the fault is there).
    #[test]
    fn a_finding_is_named_for_what_it_found() {
        for index in [0, 2, 5] {
            let b = Batch::generate(9, index, 8);
            let keep: Vec<usize> = (0..b.items()).collect();
            let text =
                as_finding(&b.toml(&keep, "t"), "fuzz seed 9: a \"quoted\" finding", None).unwrap();
            let sc = crate::scenario::check::parse_str(Path::new("finding.toml"), &text)
                .unwrap_or_else(|e| panic!("{}\n{text}", e[0]));
            assert_eq!(sc.name, "fuzz seed 9: a \"quoted\" finding");
            let expectations = text.matches("[[expect.").count();
            assert!(expectations >= 2, "{text}");
            assert!(!text.contains("record_deviation"), "{text}");
            assert!(text.starts_with("# t\n"), "the comments stay: {text}");
            // What setup minimisation left out ends the header.
            let noted = as_finding(&b.toml(&keep, "t"), "n", Some("QP uc")).unwrap();
            let header: Vec<&str> = noted.lines().take_while(|l| l.starts_with('#')).collect();
            assert_eq!(header.first(), Some(&"# t"), "{noted}");
            assert_eq!(header.last(), Some(&"# QP uc"), "{noted}");
        }
    }

    /// A batch holding a known crash's every item runs without it; one
    /// holding only some of them runs whole.
    #[test]
    fn a_known_crash_is_left_out_of_later_batches() {
        let b = full_requester_batch();
        let all: Vec<usize> = (0..b.items()).collect();
        let last = b.items() - 1;
        let send = b.describe(last);
        assert!(send.starts_with("a's SEND with Invalidate"), "{send}");
        assert_eq!(avoiding(&b, &[(b.clone(), vec![last])]), all[..last]);
        // A crash whose item this batch does not hold leaves it whole.
        let other = (0..300)
            .map(|i| Batch::generate(5, i, 16))
            .find(|o| o.requester.is_some() && (0..b.items()).all(|i| !b.repeats(i, o, 0)))
            .expect("a requester batch with a rule this one has not");
        assert_eq!(avoiding(&b, &[(other.clone(), vec![0])]), all);
        assert_eq!(avoiding(&b, &[(other, vec![0]), (b.clone(), vec![last])]), all[..last]);
        assert_eq!(avoiding(&b, &[]), all);
        let probes = Batch::generate(4, 0, 16);
        let kept = avoiding(&probes, &[(probes.clone(), vec![3])]);
        let gone: Vec<usize> = (0..probes.items()).filter(|i| !kept.contains(i)).collect();
        assert_eq!(gone.len(), 1, "{kept:?}");
        assert!(probes.repeats(gone[0], &probes, 3));
    }

    /// A probe minimised to fewer changes is still recognised in a batch that
    /// makes those changes and more; not in one that makes them otherwise.
    #[test]
    fn a_probe_repeats_a_crash_that_makes_fewer_changes() {
        let p = (0..400)
            .flat_map(|i| Batch::generate(8, i, 16).probes)
            .find(|p| p.undoable().len() == 2)
            .expect("a probe with two changes");
        let [first, second] = [p.undoable()[0], p.undoable()[1]];
        let fewer = p.without(first);
        assert_eq!(fewer.classes, [second]);
        assert!(p.repeats(&fewer), "{} repeats {}", p.describe(), fewer.describe());
        assert!(!fewer.repeats(&p), "one change is not two");
        let plain = fewer.without(second);
        assert_eq!(plain.classes, [gen::Class::Plain]);
        assert!(p.repeats(&plain) && fewer.repeats(&plain));
    }

    #[test]
    fn a_finding_says_how_often_it_showed() {
        assert_eq!(Shown { runs: 4, of: 4 }.describe(), "confirmed");
        let flaky = Shown { runs: 2, of: 4 };
        assert!(flaky.intermittent() && !flaky.steady());
        assert_eq!(flaky.describe(), "intermittent: seen 2 of 4 runs");
        assert_eq!(Shown { runs: 1, of: 4 }.describe(), "intermittent: seen 1 of 4 runs");
        assert_eq!(Shown { runs: 1, of: 1 }.describe(), "seen once, not run again");
    }

    /// The findings page names each finding and shows the verdict that did
    /// not hold in the run that reproduced it.
    #[test]
    fn the_findings_page_shows_each_finding_and_its_verdicts() {
        let mut run = ScenarioResult::not_run("x", Path::new("f.toml"), vec![], "");
        run.error = None;
        run.name = "fuzz seed 3 batch 5: the requester completed a <READ> successfully".into();
        run.verdicts = vec![Verdict::new(
            VerdictKind::Memory,
            "memory of MR rdst on a".into(),
            false,
            "c3 c3".into(),
            "00 00".into(),
        )];
        let f = Finding {
            oracle: Oracle::Protocol,
            signature: "s".into(),
            detail: "d".into(),
            batch: 5,
            probes: vec![],
            confirmed: true,
            shown: Shown { runs: 4, of: 4 },
            intermittent: false,
            scenario: PathBuf::from("f.toml"),
            capture: None,
            reproducer: Err("not a kernel finding".into()),
            setup_left_out: None,
            minimise_runs: 3,
            run,
        };
        let r = FuzzReport {
            seed: 3,
            corpus_messages: 0,
            corpus_files: Vec::new(),
            batches: 9,
            executions: 90,
            elapsed_s: 12.0,
            minimise_s: 2.0,
            executions_per_s: 9.0,
            cells_total: 10,
            cells_reached: 4,
            unreached: vec![],
            findings: vec![f],
            not_run: vec![],
            resources_counted: true,
            avoided: 0,
            rxe: RxeCoverage::default(),
            batch_ms: vec![],
        };
        let page = findings_page(&r);
        assert!(page.contains("<title>roce fuzz --seed 3</title>"), "{page}");
        assert!(page.contains("data-findings=\"1\""), "{page}");
        assert!(page.contains("completed a &lt;READ&gt; successfully"), "escaped: {page}");
        assert!(page.contains("memory of MR rdst on a") && page.contains("00 00"), "{page}");
        assert!(page.contains("4 of 10 cells"), "{page}");
    }

    #[test]
    fn a_device_event_or_a_reset_is_a_liveness_finding_and_a_qps_error_is_not() {
        use crate::protocol::Event;
        use crate::results::CounterReport;
        let mut r = ScenarioResult::not_run("t", Path::new("t.toml"), vec![], "x");
        assert!(device_said(&r).is_empty());
        let ev = |k: EventType| Event { kind: k, srq: None, qp: Some("rc".into()), t_ms: 1.0 };
        // A probe that moves b's QP to the error state draws a QP event: the
        // device doing its job.
        r.events.insert("b".into(), vec![ev(EventType(1)), ev(EventType(3))]);
        assert!(device_said(&r).is_empty());
        r.events.insert(
            "b".into(),
            vec![ev(EventType(1)), ev(EventType::PORT_ERR), ev(EventType::PORT_ERR)],
        );
        r.counters.insert(
            "a".into(),
            CounterReport {
                device: "mlx5_0".into(),
                port: 1,
                driver: None,
                deltas: BTreeMap::new(),
                reset: vec!["rx_write_requests".into()],
                reconciled: vec![],
            },
        );
        let said: Vec<(Oracle, String)> =
            device_said(&r).into_iter().map(|s| (s.oracle, s.signature)).collect();
        assert_eq!(
            said,
            [
                (Oracle::Liveness, "the device at b reported IBV_EVENT_PORT_ERR".to_string()),
                (Oracle::Liveness, "the device at a was reset: its counters went back".to_string()),
            ]
        );
    }

    #[test]
    fn verbs_objects_are_counted_and_growth_named() {
        let before = resource_counts("0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 1 srq 0\n");
        assert_eq!(before["qp"], 1);
        assert_eq!(before["ctx"], 1);
        let after = resource_counts("0: rxe0: pd 1 cq 2 qp 2 cm_id 0 mr 3 ctx 1 srq 0\n1: rxe1: pd 0 cq 0 qp 1 cm_id 0 mr 0 ctx 0 srq 0\n");
        assert_eq!(grown(&before, &after), ["mr 3 (was 0)", "qp 3 (was 1)"]);
        // A context and a PD more: another agent, not a leak.
        let agent = resource_counts("0: rxe0: pd 2 cq 2 qp 1 cm_id 0 mr 0 ctx 2 srq 0\n");
        assert!(grown(&before, &agent).is_empty());
        assert!(grown(&after, &before).is_empty());
    }

    #[test]
    fn console_lines_are_compared_without_what_changes_per_run() {
        let a = "[  101.5] BUG: kernel NULL pointer dereference, address: 0000000000000008";
        let b = "[ 2203.9] BUG: kernel NULL pointer dereference, address: 0000000000000010";
        assert_eq!(stable_line(a), stable_line(b));
        assert_eq!(stable_line(a), "BUG: kernel NULL pointer dereference, address: N");
        let w = "[7.1] WARNING: CPU: 1 PID: 77 at drivers/infiniband/sw/rxe/rxe_mw.c:112 rxe_do_bind_mw+0x3c/0x50";
        assert_eq!(stable_line(w), "WARNING: CPU: N PID: N at drivers/infiniband/sw/rxe/rxe_mw.c:112 rxe_do_bind_mw+0x3c/0x50");
    }
}
