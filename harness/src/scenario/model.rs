//! A scenario as [`super::check`] returns it: every name resolved to the thing it
//! names, every value typed and defaulted. What the controller runs and the judge
//! judges; nothing downstream checks again what is guaranteed here (a QP's
//! endpoints exist, an SGE lies inside its MR, an opcode is in the table, …).
//!
//! Owns: [`Scenario`] and every checked shape in it (QPs, MRs, steps, expectations,
//! faults), and the defaults. Imports: the file's QP types and contents
//! (`super::file`), `super::pattern`, the protocol's actions (a checked step is
//! the action its agent receives) and stream vocabulary, the verbs' names,
//! dissector's PSN and NAK types, the lab's fault [`Rule`](lab::fault::Rule).
use std::collections::BTreeMap;
use std::time::Duration;

use dissector::wire::{NakKind, Psn};

pub(crate) use super::file::{ConnectMethod, Content, QpType};
use super::pattern::Pattern;
pub(crate) use crate::protocol::stream::{Sizes, Spread, StreamContent, StreamVerb};
pub(crate) use crate::protocol::{
    Action, BthBits, Invalidate, ProbeOrder, PsnAt, ReceiveOrder, RemoteRef, SgeRef, StreamOrder,
    Verb,
};
use crate::vocab::{Access, EventType, Feature, MwKind, QpParams, WcOpcode, WcStatus};
pub(crate) use crate::vocab::{Errno, QpStateName};

/// The deadline of a scenario that sets no `timeout_ms`.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// How long a probe step waits for the answer when it sets no `settle_ms`.
pub(crate) const DEFAULT_SETTLE_MS: u64 = 20;
/// How long a `wait_completions` step waits when it sets no `within_ms`.
pub(crate) const DEFAULT_WAIT_COMPLETIONS_MS: u64 = 2000;
/// How long an `await_notify` step waits when it sets no `within_ms`.
pub(crate) const DEFAULT_NOTIFY_MS: u64 = 500;
/// The longest a probe step may wait: answers come within milliseconds and a
/// requester's retry timer within seconds; minutes are a typo.
pub(crate) const MAX_SETTLE_MS: u64 = 10_000;
/// A UD Q_Key (and a probe's DETH Q_Key) when the scenario does not say.
pub(crate) const DEFAULT_QKEY: u32 = 0x1111_1111;
/// The default partition, full member.
pub(crate) const DEFAULT_PKEY: u16 = 0xffff;

/// A checked scenario.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub(crate) name: String,
    /// The whole scenario's deadline, setup included.
    pub(crate) timeout: Duration,
    /// `completion_grace_ms` (`None`: the agent's default,
    /// [`crate::protocol::COMPLETION_GRACE_MS`]).
    pub(crate) completion_grace_ms: Option<u64>,
    pub(crate) endpoints: BTreeMap<String, Endpoint>,
    pub(crate) qps: Vec<Qp>,
    pub(crate) mrs: Vec<Mr>,
    pub(crate) steps: Vec<Step>,
    pub(crate) expect: Expectations,
    pub(crate) faults: Vec<Fault>,
    /// What every endpoint's device must have; none: asked of nobody.
    pub(crate) requires: Vec<Feature>,
    pub(crate) mws: Vec<MwSpec>,
    pub(crate) srqs: Vec<SrqSpec>,
    /// The conformance catalogue's rules it checks, by id (each one known).
    pub(crate) spec: Vec<String>,
    /// What the check found worth a look without refusing the file (`roce
    /// check` prints them; running does not).
    pub(crate) warnings: Vec<super::Diagnostic>,
    /// Of a parameterised file: the case (`access=local_write, op=read`, or the
    /// `[[case]]`'s name); `name` ends with it in brackets.
    pub(crate) case: Option<String>,
}

impl Scenario {
    /// `2 steps, 4 expectations`: what `roce check` and `roce new` say of it.
    pub(crate) fn shape(&self) -> String {
        let plural = |k: usize, w: &str| format!("{k} {w}{}", if k == 1 { "" } else { "s" });
        format!(
            "{}, {}",
            plural(self.steps.len(), "step"),
            plural(self.expect.len(), "expectation")
        )
    }

    /// Why the scenario must have the lab's switch to itself, if it must: its
    /// fault rules would act on other scenarios' frames, its probes and its timed
    /// wire checks on frames that other scenarios' traffic could hold up. The
    /// others may run side by side (`roce run -j N`).
    pub(crate) fn needs_the_wire_alone(&self) -> Option<&'static str> {
        if !self.faults.is_empty() {
            return Some("it has [[fault]] rules");
        }
        if self.steps.iter().any(|s| matches!(s.action(), Some(Action::Probe(_)))) {
            return Some("it sends probes");
        }
        let timed = |w: &WireExpect| {
            w.rnr_timer_honoured || w.ack_timeout || w.retransmit_within_ms.is_some()
        };
        if self.expect.wire.iter().any(timed) {
            return Some("its wire checks measure the device's timers");
        }
        if !self.expect.counters.is_empty() {
            return Some("its counter expectations count every frame of the device");
        }
        if self.steps.iter().any(|s| matches!(s, Step::Stream(_))) {
            return Some("its streams' numbers would measure the other scenarios' traffic too");
        }
        None
    }
}

/// A memory window on one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MwSpec {
    pub(crate) name: String,
    pub(crate) on: String,
    pub(crate) kind: MwKind,
}

/// A shared receive queue on one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SrqSpec {
    pub(crate) name: String,
    pub(crate) on: String,
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
}

/// Where an endpoint runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// Lab VM; `None` means the VM of the endpoint's name.
    pub(crate) vm: Option<String>,
    pub(crate) device: Option<String>,
    pub(crate) port: Option<u8>,
    pub(crate) gid_index: Option<u8>,
    /// How many completions its CQ holds (none: the agent's default).
    pub(crate) cq_depth: Option<u32>,
}

/// A QP pair: one QP on each endpoint of `between`, connected to each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Qp {
    pub(crate) name: String,
    pub(crate) kind: QpType,
    /// The passive side (listens) first.
    pub(crate) between: [String; 2],
    pub(crate) connect: ConnectMethod,
    /// Starting send PSN per endpoint; one not given is random.
    pub(crate) psn: BTreeMap<String, Psn>,
    pub(crate) params: QpParams,
    /// `qp_access_flags` per endpoint.
    pub(crate) access: BTreeMap<String, Access>,
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) max_inline: u32,
    /// An SRQ of one end (which takes its receives from it).
    pub(crate) srq: Option<String>,
}

impl Qp {
    /// The other end of the pair from `endpoint`.
    pub(crate) fn peer_of(&self, endpoint: &str) -> &str {
        if self.between[0] == endpoint {
            &self.between[1]
        } else {
            &self.between[0]
        }
    }
}

/// A memory region on one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mr {
    pub(crate) name: String,
    pub(crate) on: String,
    pub(crate) size: u64,
    pub(crate) access: Access,
    pub(crate) init: Option<Content>,
}

impl Mr {
    /// Its content before anything wrote to it: `init` at the start, zero after.
    pub(crate) fn initial_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; self.size as usize];
        if let Some(c) = &self.init {
            let init = c.bytes(b.len());
            let n = init.len().min(b.len());
            b[..n].copy_from_slice(&init[..n]);
        }
        b
    }
}

/// One step, in order: what the controller does itself, or an action of one
/// endpoint's agent exactly as the agent receives it (a window's rkey, learned as
/// the run goes, is the one thing the controller fills in before it sends it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Both endpoints reach this point (the controller orders the steps).
    Sync,
    Sleep {
        ms: u64,
    },
    /// Endpoint `on`'s agent carries out `action` (never a stream's: those are
    /// [`Step::Stream`]).
    Act {
        on: String,
        action: Action,
    },
    Stream(StreamStep),
}

/// A stream of work requests, checked: its QPs are `on`'s and connect to the same
/// peer, its regions fit their MRs. `order` is what `on`'s agent receives,
/// `receive` what the peer's does for a SEND or WRITE-with-immediate stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamStep {
    pub(crate) on: String,
    /// The endpoint at the other end of its QPs.
    pub(crate) peer: String,
    pub(crate) order: StreamOrder,
    pub(crate) receive: Option<ReceiveOrder>,
}

impl Step {
    /// The endpoint that carries it out (`None` for `sync` and `sleep`).
    pub(crate) fn on(&self) -> Option<&str> {
        match self {
            Step::Act { on, .. } | Step::Stream(StreamStep { on, .. }) => Some(on),
            Step::Sync | Step::Sleep { .. } => None,
        }
    }

    /// The agent's action, if it is one (a stream's is its poster's).
    pub(crate) fn action(&self) -> Option<&Action> {
        match self {
            Step::Act { action, .. } => Some(action),
            Step::Stream(_) | Step::Sync | Step::Sleep { .. } => None,
        }
    }

    /// The step's `op`, as the file names it.
    pub(crate) fn op(&self) -> &'static str {
        match self {
            Step::Sync => "sync",
            Step::Sleep { .. } => "sleep",
            Step::Stream(_) => "stream",
            Step::Act { action, .. } => action.op(),
        }
    }
}

/// A fault rule for the lab switch, parsed; `from` and `qp` are filled in as the
/// rule's direction and QPN once the endpoints are set up.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fault {
    pub(crate) rule: lab::fault::Rule,
    /// As written, for the reports.
    pub(crate) text: String,
    pub(crate) from: Option<String>,
    pub(crate) qp: Option<String>,
}

impl Fault {
    /// `drop psn=101 nth=1 (from a, QP q)`.
    pub(crate) fn describe(&self) -> String {
        let scope: Vec<String> = self
            .from
            .iter()
            .map(|e| format!("from {e}"))
            .chain(self.qp.iter().map(|q| format!("QP {q}")))
            .collect();
        if scope.is_empty() {
            self.text.clone()
        } else {
            format!("{} ({})", self.text, scope.join(", "))
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Expectations {
    pub(crate) completion: Vec<CompletionExpect>,
    pub(crate) wire: Vec<WireExpect>,
    pub(crate) memory: Vec<MemoryExpect>,
    pub(crate) probe: Vec<ProbeExpect>,
    pub(crate) event: Vec<EventExpect>,
    pub(crate) stream: Vec<StreamExpect>,
    pub(crate) order: Vec<OrderExpect>,
    /// What the device answers a step's verb (its `expect`, a `query_qp`'s state).
    pub(crate) step: Vec<StepExpect>,
    /// MRs whose guard regions must be intact (`outside = "unchanged"`).
    pub(crate) outside: Vec<OutsideExpect>,
    pub(crate) counters: Vec<CounterExpect>,
}

/// What counter `counter` of `on`'s device moves by over the scenario: within
/// `min` and `max` (both given for an exact value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CounterExpect {
    pub(crate) on: String,
    pub(crate) counter: String,
    pub(crate) min: Option<u64>,
    pub(crate) max: Option<u64>,
    pub(crate) record_deviation: bool,
}

/// Nothing outside MR `mr` of `on` changed: its guard regions hold their canary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutsideExpect {
    pub(crate) on: String,
    pub(crate) mr: String,
    pub(crate) record_deviation: bool,
}

/// What the device must answer the verb step `index` (of `Scenario::steps`) calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepExpect {
    pub(crate) index: usize,
    pub(crate) outcome: Outcome,
    pub(crate) record_deviation: bool,
}

/// A verb's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Accepted,
    /// Refused, with this errno if one is named.
    Refused(Option<Errno>),
    /// A `query_qp`: the QP is in this state.
    State(QpStateName),
    /// An `await_notify`: the CQ notified (or did not).
    Notified(bool),
}

impl Expectations {
    pub(crate) fn len(&self) -> usize {
        self.completion.len()
            + self.wire.len()
            + self.memory.len()
            + self.probe.len()
            + self.event.len()
            + self.stream.len()
            + self.order.len()
            + self.step.len()
            + self.outside.len()
    }

    /// Every header condition (`{…}`) the expectations put on frames, each once,
    /// in the order written: what the wire is read with.
    pub(crate) fn conditions(&self) -> Vec<String> {
        let wire = self.wire.iter().flat_map(|w| w.sequence.iter().chain(&w.responses).flatten());
        let probes = self.probe.iter().flat_map(|p| p.responses.iter().flatten());
        let order = self.order.iter().flat_map(|o| [&o.first, &o.then]);
        let mut out: Vec<String> = Vec::new();
        for c in wire.chain(probes).chain(order).filter_map(|p| p.filter.as_ref()) {
            if !out.contains(c) {
                out.push(c.clone());
            }
        }
        out
    }
}

/// Frames of QP `qp` across both directions: every frame `then` names comes after
/// the first frame `first` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OrderExpect {
    pub(crate) qp: String,
    pub(crate) first: Pattern,
    pub(crate) then: Pattern,
    pub(crate) record_deviation: bool,
}

/// The PSNs a wire expectation names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Psns {
    /// On from the sending QP's starting PSN, one by one.
    Consecutive,
    Each(Vec<WirePsn>),
}

/// One PSN of [`Psns::Each`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WirePsn {
    /// This many after the sending QP's starting PSN (24-bit wrap).
    First(u32),
    Absolute(Psn),
}

impl WirePsn {
    pub(crate) fn resolve(self, first: Psn) -> Psn {
        match self {
            WirePsn::First(n) => first.add(n),
            WirePsn::Absolute(p) => p,
        }
    }
}

/// `first`, `first+3`, `16777215`.
impl std::fmt::Display for WirePsn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            WirePsn::First(0) => f.write_str("first"),
            WirePsn::First(n) => write!(f, "first+{n}"),
            WirePsn::Absolute(p) => write!(f, "{p}"),
        }
    }
}

/// How many of a stream's messages completed successfully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamExpect {
    pub(crate) id: String,
    pub(crate) on: String,
    pub(crate) completed: u64,
    /// No message on any of its QPs waited longer on the wire for its
    /// acknowledgement: none starved.
    pub(crate) max_ack_latency_ms: Option<u64>,
}

/// Asynchronous events `on` saw: of this type (about this SRQ or QP); exactly
/// `count`, or at least one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EventExpect {
    pub(crate) on: String,
    pub(crate) kind: EventType,
    pub(crate) srq: Option<String>,
    pub(crate) qp: Option<String>,
    pub(crate) count: Option<usize>,
    pub(crate) record_deviation: bool,
}

/// A work completion on `on`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CompletionExpect {
    pub(crate) on: String,
    pub(crate) wr_id: Option<u64>,
    pub(crate) index: Option<usize>,
    pub(crate) status: Option<WcStatus>,
    pub(crate) opcode: Option<WcOpcode>,
    pub(crate) byte_len: Option<u32>,
    pub(crate) imm_data: Option<u32>,
    /// The memory window of `on` a SEND with Invalidate invalidated.
    pub(crate) invalidated: Option<String>,
    /// The QP whose QPN the completion's `src_qp` is: on the other end from `on`.
    pub(crate) src_qp: Option<QpOn>,
    /// `IBV_WC_GRH` set in `wc_flags`, or not.
    pub(crate) grh: Option<bool>,
    pub(crate) pkey_index: Option<u16>,
    pub(crate) count: Option<usize>,
    pub(crate) within_ms: Option<u64>,
    pub(crate) record_deviation: bool,
}

/// QP `qp` on endpoint `on`: its QPN is known only once the run has set it up
/// (the endpoint's `EndpointFacts::qps`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QpOn {
    pub(crate) qp: String,
    pub(crate) on: String,
}

impl std::fmt::Display for QpOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "QP {} of {}", self.qp, self.on)
    }
}

/// What the wire shows for one QP pair, in one direction of requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireExpect {
    pub(crate) qp: String,
    pub(crate) from: String,
    pub(crate) sequence: Option<Vec<Pattern>>,
    pub(crate) responses: Option<Vec<Pattern>>,
    pub(crate) psns: Option<Psns>,
    pub(crate) response_psns: Option<Psns>,
    pub(crate) naks: Option<Vec<NakKind>>,
    pub(crate) min_rnr_naks: Option<u64>,
    /// RNR NAKs between these, both included.
    pub(crate) rnr_naks: Option<(u64, u64)>,
    pub(crate) retransmissions: Option<u64>,
    pub(crate) max_retransmissions: Option<u64>,
    /// `true`: every ICRC valid; `false`: a bad one must be there.
    pub(crate) icrc_valid: Option<bool>,
    pub(crate) empty: bool,
    pub(crate) go_back_n: bool,
    pub(crate) cnp: Option<bool>,
    pub(crate) retransmit_within_ms: Option<u64>,
    pub(crate) rnr_timer_honoured: bool,
    pub(crate) ack_timeout: bool,
    pub(crate) record_deviation: bool,
}

impl Qp {
    /// The local ACK timeout in ns (4.096 µs × 2^timeout); `None` for 0, which
    /// means the timer never fires.
    pub(crate) fn ack_timeout_ns(&self) -> Option<u64> {
        (self.params.timeout > 0).then(|| 4096u64 << self.params.timeout.min(31))
    }
}

/// An MR's content at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemoryExpect {
    pub(crate) on: String,
    pub(crate) mr: String,
    pub(crate) offset: u64,
    pub(crate) want: Memory,
    pub(crate) record_deviation: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Memory {
    Equals(Content),
    Unchanged,
    /// Every message of the stream step `id`, as seeded.
    Stream {
        id: String,
        content: StreamContent,
    },
    /// Every crafted WRITE into it that the target acknowledged placed its
    /// payload (`probe_writes = "landed"`).
    ProbeWritesLanded,
}

/// What the target sent back to a probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeExpect {
    pub(crate) probe: String,
    pub(crate) responses: Option<Vec<Pattern>>,
    pub(crate) psn: Option<PsnAt>,
    pub(crate) within_ms: Option<u64>,
    pub(crate) record_deviation: bool,
}
