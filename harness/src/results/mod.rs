//! What runs produced, in the shapes every renderer reads and `--json` saves:
//! verdicts, each scenario's result, the whole report; the regression suite's
//! `suite.json` ([`suite`]) and device profiles ([`profile`]).
//!
//! Owns: the result types and their JSON form (`roce report` reads saved reports
//! back). Imports: the agent protocol's QP, MR, completion and probe records, kept
//! as the agents said them, and the lab switch's run report (`lab::switch`). The judge and the controller fill these types, the
//! renderers show them.
use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::protocol::stream::{Percentiles, Verification};
use crate::protocol::StreamReport;
use crate::protocol::{CounterDeltas, Event, MrInfo, ProbeSent, QpInfo, Refusal, Wc};
use crate::vocab::{Guards, QpStateName};

pub(crate) mod coverage;
pub(crate) mod matrix;
pub(crate) mod profile;
pub(crate) mod snapshots;
pub(crate) mod suite;

/// Which of a run's three views (and the probes, streams and profile built on
/// them) a verdict judges. Saved as its lowercase name (`"wire"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum VerdictKind {
    /// A work completion (or the lack of one) on an endpoint.
    Completion,
    /// An asynchronous event on an endpoint.
    Event,
    /// What an endpoint's memory holds at the end.
    Memory,
    /// A crafted frame and what answered it.
    Probe,
    /// A device profile's expectation.
    Profile,
    /// A stream of work requests: its completions, memory and pace.
    Stream,
    /// The decoded wire.
    Wire,
    /// A verb's answer when it is called (refused or accepted), or the state the
    /// device reports a QP in.
    Verb,
    /// What a device counter moved by over the scenario.
    Counter,
    /// The wire in its normal form against the snapshot kept of it: a change no
    /// expectation names (`roce suite --snapshots`).
    Snapshot,
}

impl VerdictKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            VerdictKind::Completion => "completion",
            VerdictKind::Event => "event",
            VerdictKind::Memory => "memory",
            VerdictKind::Probe => "probe",
            VerdictKind::Profile => "profile",
            VerdictKind::Stream => "stream",
            VerdictKind::Wire => "wire",
            VerdictKind::Verb => "verb",
            VerdictKind::Counter => "counter",
            VerdictKind::Snapshot => "snapshot",
        }
    }
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One expectation, judged: what was expected, what happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Verdict {
    pub kind: VerdictKind,
    pub what: String,
    pub pass: bool,
    pub expected: String,
    pub actual: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The device did not do what the expectation says, and the scenario records
    /// that (`record_deviation`) instead of failing: `pass` is then true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deviation: bool,
    /// A profile's verdict: the key of the observation it holds the run to
    /// (`counter a rcvd_pkts`, `wire q from a: CNP after CE`), as the profile
    /// file spells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<String>,
}

impl Verdict {
    pub(crate) fn new(
        kind: VerdictKind,
        what: String,
        pass: bool,
        expected: String,
        actual: String,
    ) -> Verdict {
        Verdict {
            kind,
            what,
            pass,
            expected,
            actual,
            detail: None,
            deviation: false,
            observation: None,
        }
    }

    /// Under `record_deviation`: a failed verdict becomes a recorded deviation,
    /// and either way the observation a profile keeps, `(key, holds|deviates)`.
    pub(crate) fn recorded(mut self, record: bool) -> (Verdict, Option<(String, String)>) {
        if !record {
            return (self, None);
        }
        let obs = (
            format!("deviation: {}", self.what),
            if self.pass { "holds" } else { "deviates" }.to_string(),
        );
        if !self.pass {
            self.pass = true;
            self.deviation = true;
        }
        (self, Some(obs))
    }

    /// The device did what the expectation says: passed, and not as a
    /// recorded deviation.
    pub(crate) fn held(&self) -> bool {
        self.pass && !self.deviation
    }
}

/// What an endpoint's agent reported at setup.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EndpointFacts {
    pub vm: Option<String>,
    pub device: String,
    pub port: u8,
    pub gid_index: u8,
    pub gid: String,
    pub ip: String,
    pub qps: Vec<QpInfo>,
    pub mrs: Vec<MrInfo>,
    /// The host's kernel release, as its agent said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
}

#[cfg(test)]
impl EndpointFacts {
    /// What a test's endpoint reports: rxe0 port 1 (GID index 1) at `ip`, with
    /// one QP `q` numbered `qpn` (starting at `psn`) when given, nothing else.
    pub(crate) fn rxe0(ip: &str, qp: Option<(u32, u32)>) -> EndpointFacts {
        EndpointFacts {
            vm: None,
            device: "rxe0".into(),
            port: 1,
            gid_index: 1,
            gid: String::new(),
            ip: ip.into(),
            qps: qp
                .map(|(qpn, psn)| QpInfo {
                    name: "q".into(),
                    qpn,
                    psn,
                    gid: String::new(),
                    qkey: None,
                })
                .into_iter()
                .collect(),
            mrs: vec![],
            kernel: None,
        }
    }
}

/// One side of a connected QP, as its agent reported it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Connection {
    pub qp: String,
    pub endpoint: String,
    pub local: QpInfo,
    pub remote: QpInfo,
    /// rdma_cm: how many of the peer's MRs (address, rkey) this side learned from
    /// the peer's REQ/REP private data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_mrs_from_cm: Option<usize>,
}

/// The agents' own captures of a scenario merged, kept beside a switch's
/// recording of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AgentsCapture {
    pub path: String,
    /// How each host captured, and what the merge found.
    pub from: String,
    /// What makes it incomplete (a host's capture that dropped frames, or was
    /// cut short): nothing when it holds every frame its hosts saw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incomplete: Vec<String>,
    /// Where it disagrees with the switch's recording, direction by direction
    /// (the frames sent, their order, those delivered): nothing when the hosts
    /// saw what the switch did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differs: Vec<String>,
}

/// Everything a scenario run produced (completions, events, memory, the wire): the
/// evidence the judge weighs against the expectations, and the report shows.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Evidence {
    pub endpoints: BTreeMap<String, EndpointFacts>,
    pub connections: Vec<Connection>,
    /// What each probe step sent, in step order.
    pub probes: Vec<ProbeSent>,
    /// Completions per endpoint, in the order they were polled.
    pub completions: BTreeMap<String, Vec<Wc>>,
    /// Asynchronous events per endpoint, in order.
    pub events: BTreeMap<String, Vec<Event>>,
    /// Final MR contents, by endpoint then MR name.
    pub memory: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    /// What changed outside each MR (its guard regions), by endpoint then MR
    /// name: every MR of the scenario, of any size.
    pub guards: BTreeMap<String, BTreeMap<String, Guards>>,
    pub capture: Option<std::path::PathBuf>,
    /// Where that capture came from (the lab's switch, a bridge, the agents'
    /// captures merged, a live capture, the user's file).
    pub wire_from: Option<String>,
    /// The agents' own captures merged, kept beside a switch's recording
    /// (`--capture-at-agents` through a switch): the same frames, seen from the
    /// hosts.
    pub agents_capture: Option<AgentsCapture>,
    pub wire: Option<lab::switch::RunReport>,
    /// Why the run could not be carried out to the end (setup, connect, a post that
    /// failed, a lost agent); expectations are still judged on what was collected.
    pub error: Option<String>,
    /// The device lacks something the scenario needs (a verb said EOPNOTSUPP): why.
    /// Nothing is judged; the scenario is skipped.
    pub skipped: Option<String>,
    /// What the agents said on stderr, by endpoint (kept for a failing report).
    pub agent_logs: BTreeMap<String, String>,
    pub duration_ms: u64,
    /// Where the time went.
    pub timings: Timings,
    /// What each stream step did, in step order.
    pub streams: Vec<StreamRun>,
    /// Stream messages checked in memory (`[[expect.memory]] stream = …`).
    pub verified: Vec<Verified>,
    /// What the device answered the steps whose answer is judged, in step order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<StepAnswer>,
    /// What each endpoint's device counters moved by over the scenario (none for
    /// a scenario run side by side with others, whose frames they count too).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, CounterDeltas>,
    /// When the run stopped waiting for traffic (its completions gathered, or
    /// the failure that ended it), on the clock the lab switch stamps frames
    /// with (ns since the Unix epoch). What reaches a device after it may find
    /// the device's QPs already gone, as the run tears down.
    #[serde(skip)]
    pub settled_ns: Option<u64>,
    /// When every endpoint had read its counters' baseline, on the same clock:
    /// a frame recorded before it may already be in a baseline.
    #[serde(skip)]
    pub baseline_ns: Option<u64>,
    /// When the controller first asked each endpoint for a step, on the
    /// recording's clock and never later than it was (none without a
    /// recording): nothing the endpoint's QPs did to the wire, no timer they
    /// armed, can be earlier.
    #[serde(skip)]
    pub asked_ns: BTreeMap<String, u64>,
}

/// The device's answer to a judged step's verb: refused (with which verb and
/// errno) or not, and for a `query_qp` the state it reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct StepAnswer {
    pub index: usize,
    pub on: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qp_state: Option<QpStateName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notified: Option<bool>,
}

/// A part of a scenario's run, in the order they happen: where its time goes
/// (`roce run --timings`, the JSON report's `timings_ms`, `roce lab bench`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    /// The agents started (a VM command, or a TCP connection and its handshake),
    /// `Hello`, and the device capabilities when the scenario requires features.
    AgentStart,
    /// Opening the device, as each agent measured it inside Setup.
    DeviceOpen,
    /// The rest of Setup: PD, CQ, MRs, SRQs, windows, QPs.
    Setup,
    /// The lab switch starting the scenario's recording (and its fault rules).
    RecordingStart,
    /// Every QP's connection (TCP exchange or rdma_cm), to RTS.
    Connect,
    /// The scenario's steps.
    Steps,
    /// Waiting for and collecting the completions.
    Completions,
    /// Reading the MRs back.
    Memory,
    /// Teardown on every endpoint.
    Teardown,
    /// The switch ending the recording and the capture written.
    RecordingStop,
    /// Decoding the wire and judging every expectation.
    Judge,
    /// Printing the scenario's result.
    Report,
}

impl Phase {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Phase::AgentStart => "agent start",
            Phase::DeviceOpen => "device open",
            Phase::Setup => "PD/CQ/MR/QP setup",
            Phase::RecordingStart => "recording start",
            Phase::Connect => "connection exchange",
            Phase::Steps => "steps",
            Phase::Completions => "completions",
            Phase::Memory => "memory read-back",
            Phase::Teardown => "teardown",
            Phase::RecordingStop => "capture stop/flush",
            Phase::Judge => "decode + judge",
            Phase::Report => "report",
        }
    }
}

/// Milliseconds per phase.
pub(crate) type Timings = BTreeMap<Phase, f64>;

/// Per phase, over several scenarios: the mean per scenario and the total (ms),
/// in phase order; phases no scenario went through are left out.
pub(crate) fn phase_means<'a>(
    all: impl IntoIterator<Item = &'a Timings>,
) -> Vec<(Phase, f64, f64)> {
    let (mut sum, mut n) = (Timings::new(), 0usize);
    for t in all {
        n += 1;
        for (p, ms) in t {
            *sum.entry(*p).or_default() += ms;
        }
    }
    sum.into_iter().map(|(p, total)| (p, total / n.max(1) as f64, total)).collect()
}

/// Adds the time since the last lap to a phase: the controller's stopwatch.
pub(crate) struct Laps {
    last: std::time::Instant,
}

impl Laps {
    pub(crate) fn start() -> Laps {
        Laps { last: std::time::Instant::now() }
    }
    /// The time since the last lap (or the start) goes to `phase`.
    pub(crate) fn lap(&mut self, t: &mut Timings, phase: Phase) {
        let now = std::time::Instant::now();
        *t.entry(phase).or_default() += now.duration_since(self.last).as_secs_f64() * 1000.0;
        self.last = now;
    }
}

/// How a scenario ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    /// Carried out, and every expectation held.
    Passed,
    /// An expectation failed, or it could not be carried out.
    Failed,
    /// The device lacks what it needs: nothing was judged.
    Skipped,
}

impl Status {
    /// ✓, ✗ or −.
    pub(crate) fn mark(self) -> &'static str {
        match self {
            Status::Passed => "✓",
            Status::Failed => "✗",
            Status::Skipped => "−",
        }
    }
}

/// How a passed scenario stands to IBA: the device did what the expectations
/// say, or it passed only because the profile it was held to records where it
/// departs from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Iba {
    Follows,
    Deviates,
}

impl Iba {
    /// For a passed scenario with these verdicts; none for one that did not pass.
    pub(crate) fn of(status: Status, verdicts: &[Verdict]) -> Option<Iba> {
        (status == Status::Passed).then(|| {
            if verdicts.iter().any(|v| v.deviation) {
                Iba::Deviates
            } else {
                Iba::Follows
            }
        })
    }

    /// What the reports say of it.
    pub(crate) fn said(self) -> &'static str {
        match self {
            Iba::Follows => "follows IBA",
            Iba::Deviates => "as profiled: deviates from IBA",
        }
    }
}

/// Where a device departs from IBA, as a run that held it to a profile saw it:
/// what the expectation (IBA) says, and what the device did instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Deviation {
    pub what: String,
    pub iba: String,
    pub device: String,
}

impl Deviation {
    /// `wire of QP q from a: IBA: …; this device: …`.
    pub(crate) fn said(&self) -> String {
        format!("{}: IBA: {}; this device: {}", self.what, self.iba, self.device)
    }
}

/// One scenario's result, as the reports show it (`roce report` reads it back).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ScenarioResult {
    pub name: String,
    pub file: String,
    /// The catalogue rules the scenario names in `spec` (reports from before it
    /// was recorded say none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spec: Vec<String>,
    /// Passed (kept beside `status` for reports read by older tools).
    pub pass: bool,
    /// Reports written before skipping existed say only `pass`.
    #[serde(default = "Status::from_nothing")]
    pub status: Status,
    /// For a passed scenario: whether the device followed IBA, or passed only
    /// under deviations its profile records (reports from before say none, and
    /// [`ScenarioResult::iba`] works it out from the verdicts).
    #[serde(default, rename = "iba", skip_serializing_if = "Option::is_none")]
    pub iba_said: Option<Iba>,
    /// Why it was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// Why the run could not be carried out to the end.
    pub error: Option<String>,
    pub verdicts: Vec<Verdict>,
    pub capture: Option<String>,
    /// Where the capture came from: `the lab's switch`, `the bridge at HOST:PORT`,
    /// `the agents' captures, merged (…)`, `a live capture on IFACE`, `the
    /// capture the user gave`. Reports from before say nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_from: Option<String>,
    /// With `--capture-at-agents` through a switch: the agents' captures merged,
    /// beside the switch's recording (`capture`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents_capture: Option<AgentsCapture>,
    pub duration_s: f64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agent_logs: BTreeMap<String, String>,
    /// What each endpoint set up (device, GID, QPNs, MRs) and how each QP connected:
    /// the numbers to find in the capture.
    pub endpoints: BTreeMap<String, EndpointFacts>,
    pub connections: Vec<Connection>,
    /// The scenario's `[[fault]]` rules, as written, with whose frames they touch.
    #[serde(default)]
    pub faults: Vec<String>,
    /// What this setup did, as a device profile records it.
    #[serde(default)]
    pub observations: BTreeMap<String, String>,
    /// Where the time went, in ms per phase.
    #[serde(default, rename = "timings_ms", skip_serializing_if = "BTreeMap::is_empty")]
    pub timings: Timings,
    /// The numbers of each stream step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamRun>,
    /// What each endpoint's device counters moved by, set against the wire.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, CounterReport>,
    /// Each endpoint's asynchronous events, in order (endpoints with none left out).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub events: BTreeMap<String, Vec<Event>>,
    /// The wire in its normal form ([`crate::judge::snapshot`]): what `roce suite
    /// --snapshots` keeps and compares. None without `--snapshots` or a capture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_snapshot: Option<String>,
    /// The snapshot that wire was compared with, when the two differ: what the
    /// HTML report draws as the ladder before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_kept: Option<String>,
}

/// An endpoint's device counters over one scenario: every one its port has, by
/// the driver's own names, and those the wire also counts with both numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CounterReport {
    pub device: String,
    pub port: u8,
    /// The driver whose names the judge read them by; none: shown, not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    pub deltas: BTreeMap<String, u64>,
    /// Counters that went backwards (the device was reset).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reset: Vec<String>,
    /// The counters the wire also counts (the lab switch's complete recording).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reconciled: Vec<Reconciled>,
}

/// A counter and the wire's count of the same thing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Reconciled {
    pub counter: String,
    /// What it counts, in the judge's words.
    pub meaning: String,
    /// What the device's counter moved by.
    pub device: u64,
    /// What the wire shows.
    pub wire: u64,
    /// Where the wire cannot tell (frames a device may drop before it counts
    /// them, such as crafted probes), the least it shows: any count from here to
    /// `wire` agrees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_min: Option<u64>,
    /// What the comparison cannot see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The observation a counter that disagrees with the wire makes: `counter a
/// rcvd_pkts` (its value `device 0, wire 1`). A profile records it like any
/// other; it is only judged, and only compared between two runs, where the
/// endpoint's counters were set against the wire in both.
pub(crate) fn counter_key(ep: &str, counter: &str) -> String {
    format!("counter {ep} {counter}")
}

/// The endpoint an observation key of [`counter_key`]'s is about; none for
/// every other key.
pub(crate) fn counter_key_endpoint(key: &str) -> Option<&str> {
    key.strip_prefix("counter ")?.split_once(' ').map(|(ep, _)| ep)
}

impl CounterReport {
    /// Set against the wire (read, by a driver the table knows, with the
    /// switch's complete recording): its counters' observations mean something.
    pub(crate) fn weighed(&self) -> bool {
        !self.reconciled.is_empty()
    }
}

impl Reconciled {
    pub(crate) fn agrees(&self) -> bool {
        (self.wire_min.unwrap_or(self.wire)..=self.wire).contains(&self.device)
    }

    /// `14`, or `12 to 14` where the wire cannot tell.
    pub(crate) fn wire_text(&self) -> String {
        match self.wire_min.filter(|m| *m != self.wire) {
            Some(m) => format!("{m} to {}", self.wire),
            None => self.wire.to_string(),
        }
    }
}

/// A stream step as its endpoint carried it out, and as the wire shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StreamRun {
    pub on: String,
    #[serde(flatten)]
    pub report: StreamReport,
    /// Its requester's pace on the wire (none without a capture, and none for the
    /// receiving side of a SEND stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<StreamWire>,
}

/// A stream's QPs on the wire, all together and one by one: messages from their
/// first packet to the response that acknowledged them, resends from what set them
/// off, and how far the requester ran ahead of the acknowledgements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StreamWire {
    /// Messages the requester put on the wire (a resend is not a new message).
    pub messages: u64,
    pub acked: u64,
    /// The most messages unacknowledged at once, over all the stream's QPs.
    pub peak_outstanding: u64,
    /// The stream's window: the most the agent keeps posted and not completed.
    pub window: u32,
    /// From a message's first packet to the response that acknowledged it.
    pub ack_latency_ns: Option<Percentiles>,
    pub resends: u64,
    /// From what set a resend off (a NAK, the ACK timer, an RNR NAK) to the resend.
    pub resend_latency_ns: Option<Percentiles>,
    pub naks: u64,
    pub rnr_naks: u64,
    pub qps: Vec<QpPace>,
    /// Latency over time, for the HTML report's plot.
    pub plot: Plot,
}

/// One QP of a stream on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct QpPace {
    pub qp: String,
    pub messages: u64,
    pub acked: u64,
    pub peak_outstanding: u64,
    pub ack_latency_ns: Option<Percentiles>,
    pub resends: u64,
    /// Resend runs that started at a PSN already acknowledged on the wire.
    #[serde(default)]
    pub redundant_resends: u64,
    pub naks: u64,
    pub rnr_naks: u64,
    /// Go-back-N over the QP's whole run (`None` in reports from before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_back_n: Option<GoBackN>,
}

/// Go-back-N recovery over a QP's whole run: how many rules it broke, and the first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GoBackN {
    pub broken: u64,
    pub first: Option<String>,
}

/// A stream's acknowledgement latency over time, in at most [`Plot::BINS`] slices
/// of its run, and its anomalies: enough to draw a run of any length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Plot {
    /// The run, from the first message on the wire to the last acknowledgement.
    pub span_ns: u64,
    /// Each slice that acknowledged something: where it starts (ns from the first
    /// message), its median and its highest latency (ns), how many messages.
    pub slices: Vec<Slice>,
    /// Resends (the first [`Plot::MARKS`]): ns from the first message, and what
    /// set each off.
    pub resends: Vec<Mark>,
    /// NAKs and RNR NAKs (the first [`Plot::MARKS`]).
    pub naks: Vec<Mark>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Slice {
    pub at_ns: u64,
    pub p50_ns: u64,
    pub max_ns: u64,
    pub messages: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Mark {
    pub at_ns: u64,
    pub frame: u64,
    pub what: String,
}

impl Plot {
    pub(crate) const BINS: u64 = 400;
    pub(crate) const MARKS: usize = 500;
}

/// A stream's messages in an MR, checked where the MR is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Verified {
    pub on: String,
    pub mr: String,
    pub stream: String,
    pub result: Verification,
}

impl Status {
    /// What a report without `status` meant: read from `pass` after the fact.
    fn from_nothing() -> Status {
        Status::Failed
    }
}

impl ScenarioResult {
    /// For a passed scenario: whether the device followed IBA or deviated as
    /// profiled.
    pub(crate) fn iba(&self) -> Option<Iba> {
        Iba::of(self.status, &self.verdicts)
    }

    /// The deviations from IBA it passed under.
    pub(crate) fn deviations(&self) -> Vec<Deviation> {
        self.verdicts
            .iter()
            .filter(|v| v.deviation)
            .map(|v| Deviation {
                what: v.what.clone(),
                iba: v.expected.clone(),
                device: v.actual.clone(),
            })
            .collect()
    }

    /// A scenario that was not run, and why.
    pub(crate) fn not_run(
        name: &str,
        file: &Path,
        faults: Vec<String>,
        why: &str,
    ) -> ScenarioResult {
        ScenarioResult {
            name: name.to_string(),
            file: file.display().to_string(),
            spec: Vec::new(),
            pass: false,
            status: Status::Failed,
            iba_said: None,
            skip_reason: None,
            error: Some(why.to_string()),
            verdicts: Vec::new(),
            capture: None,
            wire_from: None,
            agents_capture: None,
            duration_s: 0.0,
            agent_logs: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            connections: Vec::new(),
            faults,
            observations: BTreeMap::new(),
            timings: BTreeMap::new(),
            streams: Vec::new(),
            counters: BTreeMap::new(),
            events: BTreeMap::new(),
            wire_snapshot: None,
            wire_kept: None,
        }
    }
}

/// A whole run: `roce run --json` writes it, `roce report` reads it back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Report {
    pub scenarios: Vec<ScenarioResult>,
    pub passed: usize,
    pub failed: usize,
    #[serde(default)]
    pub skipped: usize,
    pub duration_s: f64,
    /// The device profile the run was held to (`--profile`), by its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

impl Report {
    /// Counts each status over `scenarios`.
    pub(crate) fn new(
        scenarios: Vec<ScenarioResult>,
        duration_s: f64,
        profile: Option<String>,
    ) -> Report {
        let count = |s| scenarios.iter().filter(|r| r.status == s).count();
        let (passed, failed, skipped) =
            (count(Status::Passed), count(Status::Failed), count(Status::Skipped));
        Report { scenarios, passed, failed, skipped, duration_s, profile }
    }

    /// Reads a saved report; the error says which file and what is wrong with it.
    pub(crate) fn load(path: &Path) -> Result<Report, String> {
        let hint = format!("hint: `roce run --json {} SCENARIO…` writes one", path.display());
        let data = std::fs::read(path)
            .map_err(|e| format!("cannot read {}: {e}\n{hint}", path.display()))?;
        let mut r: Report = serde_json::from_slice(&data).map_err(|e| {
            if e.is_syntax() || e.is_eof() {
                format!("{} is not JSON ({e})\n{hint}", path.display())
            } else {
                format!("{} is not a roce run report ({e})\n{hint}", path.display())
            }
        })?;
        for s in r.scenarios.iter_mut().filter(|s| s.pass) {
            s.status = Status::Passed;
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::VerdictKind::{self, *};

    /// Saved reports and suite.json files name a verdict's kind by the word they
    /// always had: the enum writes it and reads it back, and nothing else is read.
    #[test]
    fn verdict_kinds_keep_their_saved_names() {
        let all = [Completion, Event, Memory, Probe, Profile, Stream, Wire, Verb];
        let names = ["completion", "event", "memory", "probe", "profile", "stream", "wire", "verb"];
        for (k, n) in all.into_iter().zip(names) {
            assert_eq!(serde_json::to_string(&k).ok(), Some(format!("\"{n}\"")));
            assert_eq!(k.to_string(), n);
            let back: VerdictKind = serde_json::from_str(&format!("\"{n}\"")).expect(n);
            assert_eq!(back, k);
        }
        assert!(serde_json::from_str::<VerdictKind>("\"Wire\"").is_err());
    }
}
