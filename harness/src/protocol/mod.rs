//! The controller ↔ endpoint agent protocol (`roce run` ↔ `roce agent`): the
//! agent's own types, and the vocabulary every room above it reads (the scenario
//! model names a stream's content in [`stream`]'s terms; the judge, results and
//! renderers read what agents report). It sits below `scenario` so that none of
//! them reaches up into `agent` for a shape. The controller resolves a scenario into them (names of QPs
//! and MRs stay names; everything else is concrete: attributes defaulted, opcodes
//! numbers, payloads bytes), so a new scenario key never changes this protocol.
//!
//! Transport: a byte stream (the agent's stdin/stdout when the lab starts it in a
//! VM, or a TCP connection to `roce agent --listen ADDR:PORT` on a real host). Each
//! message is a 4-byte big-endian length, then that many bytes of JSON (one
//! [`ToAgent`] or [`FromAgent`]). A length above [`MAX_MESSAGE`], bytes that are
//! not JSON, or JSON that is not a known message is refused with
//! [`FromAgent::Error`] (and the stream closed when it cannot be resynchronised):
//! never a crash.
//!
//! Order of a run, per agent: `Hello` → (`Capabilities`, when the scenario
//! requires features) → `Setup` → `Baseline` → `Connect` (one per QP) → `Do`… → `Completions` /
//! `ReadMemory` / `Guards` (any number) → `Teardown`; with the wire captured at
//! the agents, `CaptureStart` between `Setup` and `Baseline`, and `CaptureStop`,
//! `CaptureRead`… before `Teardown`. Every request gets exactly one answer,
//! in order; `Heartbeat`, at any time, gets none.
//!
//! Over the network the stream is authenticated (`agent::auth`): the same
//! frames, each sealed with a sequence number and a MAC.
//!
//! Owns: the messages, their framing, and the stream vocabulary ([`stream`]).
//! Imports: the verbs vocabulary (names of access flags, statuses, features).
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read, Write};

use dissector::wire::Psn;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::vocab::{
    Access, Caps, EventType, Feature, Guards, MwKind, Placement, QpKind, QpStateName, Selectivity,
    SendFlag, WcOpcode, WcStatus,
};
#[cfg(feature = "lab")]
pub(crate) mod bridge;
pub(crate) mod stream;

use stream::{Percentiles, StreamContent, StreamVerb, Verification};

/// The most completions a CQ an agent makes or resizes may hold (each takes
/// pinned kernel memory); scenarios are checked against it too.
pub(crate) const MAX_CQ_DEPTH: u32 = 65_536;

/// A CQ depth an agent takes: 1 to [`MAX_CQ_DEPTH`].
pub(crate) fn cq_depth_fits(cqe: u32) -> bool {
    (1..=MAX_CQ_DEPTH).contains(&cqe)
}

/// Bumped on any incompatible change; both sides say theirs in `Hello`. 3: device
/// capabilities, memory windows, SRQs, ATOMIC WRITE, FLUSH, invalidation. 4: the
/// passive side listens (`Listen`) before the active side is asked to connect;
/// streams (`Action::Stream`, `Verify`). 5: the receiving side of SEND and
/// WRITE-with-immediate streams (`Action::Receive`, its `mr` optional), streams
/// round a ring and dealt at random (`StreamContent::ring`, `StreamContent::spread`). 6:
/// atomic streams mix CmpSwap in (`StreamVerb::Atomic`) and report the chain of
/// old values (`StreamReport::atomics`). 7: a QP's access flags beside its
/// transport parameters (`QpSetup::access`), not among them. 8: probes set
/// TVer, SE, PadCnt and the UDP source port (`BthBits`). 9: steps whose refusal
/// is their outcome (`Do::judged`, `Done::refused`), QP states (`ModifyQp`,
/// `QueryQp`), deregistering and re-registering MRs, deallocating windows, CQ
/// notifications (`ArmCq`, `AwaitNotify`). 10: every MR between guard regions,
/// reported by `Guards`. 11: a scenario's checked steps are the actions sent: a
/// remote end may name the peer's window (`RemoteRef::mw`), a SEND with
/// Invalidate names what it invalidates (`Invalidate`). 12: a teardown says what
/// the device's counters moved by (`TornDown::counters`). 13: a CQ's depth
/// (`Setup::cq_depth`), resized by a step (`ResizeCq`). 14: the counters'
/// baseline is read when the controller asks (`Baseline`), once the wire is
/// being recorded, not at the end of `Setup`.
pub(crate) const VERSION: u32 = 14;
/// No message is larger (a memory dump of a 512 KiB MR in hex fits).
pub(crate) const MAX_MESSAGE: usize = 2 << 20;
/// The largest MR read back whole (`ReadMemory`); larger ones are checked where
/// they are (`Verify`).
pub(crate) const READ_BACK_MAX: u64 = 512 << 10;

/// The most bytes of a capture one `CaptureRead` answer carries (hex: twice
/// that, inside [`MAX_MESSAGE`]).
pub(crate) const CAPTURE_CHUNK: u64 = 512 << 10;
/// The most bytes an agent's capture of one scenario keeps: past it the agent
/// stops capturing and says the capture is cut short.
pub(crate) const CAPTURE_MAX: u64 = 256 << 20;

/// Bytes, carried as lower-case hex.
#[derive(Clone, PartialEq, Eq, Default)]
pub(crate) struct Hex(pub Vec<u8>);

impl fmt::Debug for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hex({})", dissector::text::hex_string(&self.0))
    }
}

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&dissector::text::hex_string(&self.0))
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Hex, D::Error> {
        let s = String::deserialize(d)?;
        dissector::text::hex_bytes(&s).map(Hex).map_err(serde::de::Error::custom)
    }
}

/// controller → agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum ToAgent {
    Hello {
        version: u32,
    },
    /// "Still here", sent by a controller over the network when it has sent
    /// nothing for a while: a listening agent drops a controller that stays silent
    /// beyond its heartbeat deadline. The one message that gets no answer.
    Heartbeat,
    /// What the device (default: the first) can do, before anything is set up.
    Capabilities {
        device: Option<String>,
    },
    /// Open the device and create this endpoint's PD, CQ, MRs and QPs (QPs stay in
    /// RESET until `Connect`).
    Setup(Setup),
    /// Read the device port's counters now: what `Teardown` reports is how far
    /// they moved from here. Sent once the wire is being recorded, so that what
    /// the counters count and what the recording holds start together (a frame
    /// between the two, say a previous scenario's late disconnect, would be
    /// counted and never seen). The agent takes it once the counters hold still
    /// (a frame already carried may still be on its way into the device, and the
    /// kernel caches counters for a few milliseconds). Without it, the baseline
    /// is the end of `Setup`.
    Baseline,
    /// The passive side of QP `qp`'s connection starts listening on `port` (TCP
    /// or rdma_cm, as the QP connects), so the active side's first attempt finds
    /// it: no refused SYN or rejected REQ on the wire. Its `Connect` accepts.
    Listen {
        qp: String,
        port: u16,
    },
    /// Bring QP `qp` to RTS with its peer.
    Connect(Connect),
    /// Carry out one step: post a WR, wait for completions, sleep, send a probe.
    /// Posting returns at once; completions are polled in the background.
    Do {
        index: usize,
        action: Action,
        /// The step expects the device to answer (a scenario's `expect`, a
        /// `query_qp`): a verb's refusal is then its outcome, said in `Done`
        /// (`refused`), not an error that ends the run.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        judged: bool,
    },
    /// All completions polled so far, waiting up to `wait_ms` until there are at
    /// least `min`, then polling `grace_ms` more (default
    /// [`COMPLETION_GRACE_MS`]; not sent when it is, so an agent of before reads
    /// the request).
    Completions {
        min: usize,
        wait_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grace_ms: Option<u64>,
    },
    /// An MR's current content.
    ReadMemory {
        mr: String,
    },
    /// Whether MR `mr` holds, from `offset`, a stream's messages as seeded: checked
    /// here, so a large MR never crosses the protocol.
    Verify {
        mr: String,
        offset: u64,
        content: StreamContent,
    },
    /// What changed outside each MR: its guard regions.
    Guards,
    /// Start capturing this endpoint's wire on its own host (`--wire agents`):
    /// RoCEv2 (UDP 4791) on the network interface of the device port's GID,
    /// through libpcap, or with the capture command the agent was started with
    /// (`roce agent --capture-command`). Sent after `Setup` (the interface is
    /// known then) and before `Baseline`. The controller never names what to
    /// run: only the agent's own host does.
    CaptureStart,
    /// Stop the capture: what it holds ([`FromAgent::Captured`]).
    CaptureStop,
    /// Up to [`CAPTURE_CHUNK`] bytes of the stopped capture (a pcapng file) from
    /// `offset`.
    CaptureRead {
        offset: u64,
    },
    /// Destroy what `Setup` made (a lab agent keeps the context and PD open for
    /// the next scenario) and end this controller's session.
    Teardown,
}

/// How long an agent goes on polling once the completions a run waits for have
/// come, for anything unexpected after them (an error behind the expected ones),
/// unless the scenario says otherwise (`completion_grace_ms`).
pub(crate) const COMPLETION_GRACE_MS: u64 = 50;

/// One endpoint's verbs objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Setup {
    /// The RDMA device (default: the first).
    pub device: Option<String>,
    pub port: u8,
    /// The GID index (default: the port's IPv4-mapped RoCEv2 GID).
    pub gid_index: Option<u8>,
    /// How many completions its CQ holds (default 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cq_depth: Option<u32>,
    pub qps: Vec<QpSetup>,
    pub mrs: Vec<MrSetup>,
    /// Created after the MRs, before the QPs (which may use them).
    #[serde(default)]
    pub srqs: Vec<SrqSetup>,
    #[serde(default)]
    pub mws: Vec<MwSetup>,
}

impl Setup {
    /// A setup with one of every kind of object (an RC QP on an SRQ, an MR, a
    /// type 2 window): what the round-trip test and the agent protocol's fuzz
    /// seeds ([`crate::inputs::message_seeds`]) start from.
    pub(crate) fn example() -> Setup {
        Setup {
            device: None,
            port: 1,
            gid_index: Some(1),
            cq_depth: Some(8),
            qps: vec![QpSetup {
                name: "q".into(),
                kind: QpKind::Rc,
                caps: Caps { max_send_wr: 16, max_recv_wr: 16, max_sge: 4, max_inline: 0 },
                psn: Some(100),
                params: QpParams {
                    mtu: 1024,
                    timeout: 14,
                    retry_cnt: 7,
                    rnr_retry: 7,
                    min_rnr_timer: 12,
                    max_rd_atomic: 1,
                    max_dest_rd_atomic: 1,
                    qkey: 0x1111_1111,
                },
                access: Access(0xe),
                connect: ConnectBy::RdmaCm,
                atomic_write: true,
                flush: true,
                srq: Some("s".into()),
            }],
            mrs: vec![MrSetup {
                name: "m".into(),
                size: 64,
                access: Access(1 | 1 << 8),
                fill: Fill::Repeat(Hex(vec![0xab, 0])),
            }],
            srqs: vec![SrqSetup { name: "s".into(), max_wr: 8, max_sge: 1 }],
            mws: vec![MwSetup { name: "w".into(), kind: MwKind::Type2 }],
        }
    }
}

/// A shared receive queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SrqSetup {
    pub name: String,
    pub max_wr: u32,
    pub max_sge: u32,
}

/// A memory window, allocated unbound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MwSetup {
    pub name: String,
    pub kind: MwKind,
}

/// How a QP is connected to its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ConnectBy {
    /// QPN, PSN, GID exchanged over a TCP socket.
    Tcp,
    /// librdmacm; the MR table rides in the private data.
    RdmaCm,
    /// Each side is told the other's QPN, PSN and GID by the controller, from
    /// what the other's `Setup` answered ([`Connect::peer`]): nothing passes
    /// between the endpoints but the scenario's own traffic.
    Controller,
}

/// How a QP runs its transport (one home: [`crate::vocab::QpParams`]).
pub(crate) use crate::vocab::QpParams;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QpSetup {
    pub name: String,
    pub kind: QpKind,
    pub caps: Caps,
    /// The first send PSN; `None`: a random one.
    pub psn: Option<u32>,
    pub params: QpParams,
    /// `qp_access_flags` on this end.
    pub access: Access,
    pub connect: ConnectBy,
    /// Created with `ibv_create_qp_ex` and these extended send operations.
    #[serde(default)]
    pub atomic_write: bool,
    #[serde(default)]
    pub flush: bool,
    /// Receives come from this SRQ of the endpoint.
    #[serde(default)]
    pub srq: Option<String>,
}

/// What an MR holds when it is registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Fill {
    Zero,
    /// These bytes at the start, zero after.
    Bytes(Hex),
    /// These bytes repeated over the whole MR.
    Repeat(Hex),
}

impl Fill {
    /// The MR's first `len` bytes.
    pub(crate) fn bytes(&self, len: usize) -> Vec<u8> {
        match self {
            Fill::Zero => Vec::new(),
            Fill::Bytes(b) => b.0.iter().copied().take(len).collect(),
            Fill::Repeat(u) if u.0.is_empty() => Vec::new(),
            Fill::Repeat(u) => u.0.iter().copied().cycle().take(len).collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MrSetup {
    pub name: String,
    pub size: u64,
    pub access: Access,
    pub fill: Fill,
}

/// Bring a QP to RTS. The passive side listens on `port` (TCP exchange or
/// rdma_cm) on its test address; the active side connects to `peer_ip:port`.
/// `peer_mrs` is the peer endpoint's MR table (for remote addresses in steps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Connect {
    pub qp: String,
    pub passive: bool,
    pub peer_ip: String,
    pub port: u16,
    pub peer_mrs: Vec<MrInfo>,
    /// The peer's QP as its `Setup` answered, for a QP connected by the
    /// controller ([`ConnectBy::Controller`]); not sent otherwise, so an agent of
    /// before reads every other `Connect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<QpInfo>,
}

/// A slice of an MR of this endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SgeRef {
    pub mr: String,
    pub offset: u64,
    pub len: u32,
    /// It may reach past the MR's end, into the guard region after it (at most
    /// [`crate::vocab::memory::GUARD`] bytes): the device must refuse it. Not
    /// sent when false, so an agent of before reads every other SGE.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outside_mr: bool,
}

/// An MR of the peer, by name (its address and rkey as exchanged), at an offset;
/// `rkey` overrides. Through a memory window `mw` of the peer, `mr` and `offset`
/// are where the window was last bound, and the controller fills `rkey` in with
/// the window's rkey as the run learned it before it sends the action (an agent
/// refuses a window whose rkey is not filled in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemoteRef {
    pub mr: String,
    /// From the MR's start; negative before it (a request the responder must
    /// refuse).
    pub offset: i64,
    pub rkey: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mw: Option<String>,
}

impl RemoteRef {
    /// The rkey to put in the WR: the one given (or filled in for a window), else
    /// `exchanged`, the MR's own.
    pub(crate) fn rkey_or(&self, exchanged: u32) -> Result<u32, String> {
        match (self.rkey, &self.mw) {
            (Some(k), _) => Ok(k),
            (None, None) => Ok(exchanged),
            (None, Some(w)) => Err(format!(
                "the rkey of the peer's memory window `{w}` was not filled in by the controller"
            )),
        }
    }
}

/// What a SEND with Invalidate invalidates: a memory window of the peer (its rkey
/// as last bound, filled in by the controller before it sends the action), or a
/// raw rkey.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Invalidate {
    Mw { mw: String, rkey: Option<u32> },
    Rkey(u32),
}

impl Invalidate {
    /// The rkey the IETH carries.
    pub(crate) fn rkey(&self) -> Result<u32, String> {
        match self {
            Invalidate::Rkey(k) | Invalidate::Mw { rkey: Some(k), .. } => Ok(*k),
            Invalidate::Mw { mw, rkey: None } => Err(format!(
                "the rkey of the peer's memory window `{mw}` was not filled in by the controller"
            )),
        }
    }
}

/// A send-queue verb and what only it carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Verb {
    /// On UD, `qkey` overrides the peer's Q_Key in the WR.
    Send {
        imm: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        qkey: Option<u32>,
    },
    Write {
        remote: RemoteRef,
        imm: Option<u32>,
    },
    Read {
        remote: RemoteRef,
    },
    CmpSwap {
        remote: RemoteRef,
        compare: u64,
        swap: u64,
    },
    FetchAdd {
        remote: RemoteRef,
        add: u64,
    },
    /// 8 bytes, as they land.
    AtomicWrite {
        remote: RemoteRef,
        value: Hex,
    },
    Flush {
        remote: RemoteRef,
        len: u64,
        placement: Placement,
        level: Selectivity,
    },
    /// SEND with Invalidate of one of the peer's rkeys.
    SendInv {
        invalidate: Invalidate,
    },
    /// Invalidate this endpoint's window `mw` (its current rkey).
    LocalInv {
        mw: String,
    },
    /// Bind this endpoint's window `mw` to `len` bytes of its MR `mr` from
    /// `offset`: a type 1 window with `ibv_bind_mw`, a type 2 one by a WR.
    BindMw {
        mw: String,
        mr: String,
        offset: u64,
        len: u64,
        access: Access,
    },
}

/// A verb's remote end, borrowed as the verb is (`&` or `&mut`).
macro_rules! remote_of {
    ($verb:expr) => {
        match $verb {
            Verb::Write { remote, .. }
            | Verb::Read { remote }
            | Verb::CmpSwap { remote, .. }
            | Verb::FetchAdd { remote, .. }
            | Verb::AtomicWrite { remote, .. }
            | Verb::Flush { remote, .. } => Some(remote),
            Verb::Send { .. }
            | Verb::SendInv { .. }
            | Verb::LocalInv { .. }
            | Verb::BindMw { .. } => None,
        }
    };
}

impl Verb {
    /// The step's `op`, as a scenario file names it.
    pub(crate) fn op(&self) -> &'static str {
        match self {
            Verb::Send { imm: None, .. } => "send",
            Verb::Send { imm: Some(_), .. } => "send_imm",
            Verb::Write { imm: None, .. } => "write",
            Verb::Write { imm: Some(_), .. } => "write_imm",
            Verb::Read { .. } => "read",
            Verb::CmpSwap { .. } => "cmp_swap",
            Verb::FetchAdd { .. } => "fetch_add",
            Verb::AtomicWrite { .. } => "atomic_write",
            Verb::Flush { .. } => "flush",
            Verb::SendInv { .. } => "send_inv",
            Verb::LocalInv { .. } => "local_inv",
            Verb::BindMw { .. } => "bind_mw",
        }
    }

    /// The peer's memory it addresses, if any.
    pub(crate) fn remote(&self) -> Option<&RemoteRef> {
        remote_of!(self)
    }

    /// The same, to fill a window's rkey in.
    pub(crate) fn remote_mut(&mut self) -> Option<&mut RemoteRef> {
        remote_of!(self)
    }
}

/// One step an agent carries out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Action {
    PostRecv {
        qp: String,
        wr_id: u64,
        sges: Vec<SgeRef>,
    },
    Post {
        qp: String,
        wr_id: u64,
        verb: Verb,
        sges: Vec<SgeRef>,
        flags: Vec<SendFlag>,
    },
    /// Wait until `count` more completions were polled (up to `within_ms`).
    WaitCompletions {
        count: u32,
        within_ms: u64,
    },
    Sleep {
        ms: u64,
    },
    Probe(ProbeOrder),
    PostSrqRecv {
        srq: String,
        wr_id: u64,
        sges: Vec<SgeRef>,
    },
    /// Arm SRQ `srq`'s limit event (`ibv_modify_srq`, `IBV_SRQ_LIMIT`).
    ArmSrq {
        srq: String,
        limit: u32,
    },
    /// Move QP `qp` to `state` (`ibv_modify_qp`) with what the transition requires
    /// (or, `state_only`, the state alone), and its remote `access` if given.
    ModifyQp {
        qp: String,
        state: QpStateName,
        #[serde(default)]
        state_only: bool,
        #[serde(default)]
        access: Option<Access>,
    },
    /// Say the state the device reports for QP `qp` (`ibv_query_qp`).
    QueryQp {
        qp: String,
    },
    /// Deregister MR `mr` (its buffer stays readable).
    DeregMr {
        mr: String,
    },
    /// Re-register MR `mr` with `access`.
    ReregMr {
        mr: String,
        access: Access,
    },
    /// Deallocate memory window `mw`.
    DeallocMw {
        mw: String,
    },
    /// Arm the CQ for its next (or next solicited) completion.
    ArmCq {
        #[serde(default)]
        solicited_only: bool,
    },
    /// Wait up to `within_ms` for the CQ's notification; say whether it came.
    AwaitNotify {
        within_ms: u64,
    },
    /// Resize the CQ to hold at least `cqe` completions (`ibv_resize_cq`).
    ResizeCq {
        cqe: u32,
    },
    /// Post a stream of work requests and see every one complete.
    Stream(StreamOrder),
    /// Keep receives posted for the peer's SEND stream and check each message as
    /// it arrives.
    Receive(ReceiveOrder),
}

impl Action {
    /// The `op` of the scenario step it carries out, as the file names it (the
    /// receiving side of a stream: `stream`).
    pub(crate) fn op(&self) -> &'static str {
        match self {
            Action::PostRecv { .. } => "post_recv",
            Action::Post { verb, .. } => verb.op(),
            Action::WaitCompletions { .. } => "wait_completions",
            Action::Sleep { .. } => "sleep",
            Action::Probe(_) => "probe",
            Action::PostSrqRecv { .. } => "post_srq_recv",
            Action::ArmSrq { .. } => "arm_srq",
            Action::ModifyQp { .. } => "modify_qp",
            Action::QueryQp { .. } => "query_qp",
            Action::DeregMr { .. } => "dereg_mr",
            Action::ReregMr { .. } => "rereg_mr",
            Action::DeallocMw { .. } => "dealloc_mw",
            Action::ArmCq { .. } => "arm_cq",
            Action::AwaitNotify { .. } => "await_notify",
            Action::ResizeCq { .. } => "resize_cq",
            Action::Stream(_) | Action::Receive(_) => "stream",
        }
    }

    /// How long, at most, the agent may take over it before it answers, beyond
    /// the time any answer may take: the wait it was told to make.
    pub(crate) fn waits_ms(&self) -> u64 {
        match self {
            Action::WaitCompletions { within_ms, .. } | Action::AwaitNotify { within_ms } => {
                *within_ms
            }
            Action::Probe(p) => p.settle_ms,
            Action::Stream(StreamOrder { within_ms, .. })
            | Action::Receive(ReceiveOrder { within_ms, .. }) => *within_ms,
            Action::Sleep { ms } => *ms,
            Action::PostRecv { .. }
            | Action::Post { .. }
            | Action::PostSrqRecv { .. }
            | Action::ArmSrq { .. }
            | Action::ModifyQp { .. }
            | Action::QueryQp { .. }
            | Action::DeregMr { .. }
            | Action::ReregMr { .. }
            | Action::DeallocMw { .. }
            | Action::ArmCq { .. }
            | Action::ResizeCq { .. } => 0,
        }
    }
}

/// A PSN as a probe (or a probe's expectation) names it: relative to the PSN its
/// target expects, or absolute (24 bits, checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PsnAt {
    Next(i32),
    Absolute(u32),
}

impl PsnAt {
    /// The PSN, given what `next` is (24-bit wrap).
    pub(crate) fn resolve(self, next: Psn) -> Psn {
        match self {
            PsnAt::Next(off) => next.add(off as u32),
            PsnAt::Absolute(p) => Psn::new(p),
        }
    }
}

/// `next`, `next+3`, `next-1`, `100`.
impl std::fmt::Display for PsnAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            PsnAt::Next(0) => f.write_str("next"),
            PsnAt::Next(o) if o > 0 => write!(f, "next+{o}"),
            PsnAt::Next(o) => write!(f, "next{o}"),
            PsnAt::Absolute(p) => write!(f, "{p}"),
        }
    }
}

/// A crafted packet to send in the name of QP `qp`, to the QP at its other end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProbeOrder {
    pub id: String,
    pub qp: String,
    pub opcode: u8,
    pub psn: PsnAt,
    /// `next` moves on by one after it.
    pub moves_next: bool,
    /// For RETH / AtomicETH.
    pub remote: Option<RemoteRef>,
    pub dma_len: Option<u32>,
    pub payload: Hex,
    pub imm_data: u32,
    pub compare: u64,
    pub swap_add: u64,
    pub ack_req: bool,
    pub bad_icrc: bool,
    /// BTH fields a probe sets other than the defaults.
    #[serde(default)]
    pub bth: BthBits,
    /// The UDP source port (default: 0xC000 | the prober's QPN's low 14 bits).
    #[serde(default)]
    pub udp_src_port: Option<u16>,
    pub p_key: u16,
    pub dest_qp: Option<u32>,
    pub q_key: u32,
    pub copies: u32,
    /// How long to wait after sending, for the answer to be on the wire.
    pub settle_ms: u64,
    /// Waits less than `settle_ms` once this long has passed with no frame from
    /// the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_ms: Option<u64>,
}

/// A probe's BTH bits other than its opcode, PSN, AckReq and P_Key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BthBits {
    /// Transport header version (0 is the only one defined).
    pub tver: u8,
    /// SE: solicited event.
    pub solicited: bool,
    /// PadCnt and that many pad bytes; `None`: what pads the payload to 4.
    pub pad: Option<u8>,
}

/// What a device port's counters moved by over one scenario, from the end of its
/// `Setup` to the end of its `Teardown` (its QPs destroyed: the device sends
/// nothing more for it), by the driver's own names: every counter of the
/// port's `hw_counters` and `counters` directories, zeros included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CounterDeltas {
    pub device: String,
    /// What drives it, as sysfs says: the PCI device's driver (`mlx5_core`), or
    /// `rdma_rxe` for Soft-RoCE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    pub port: u8,
    pub deltas: BTreeMap<String, u64>,
    /// Counters that went backwards (the device was reset): not in `deltas`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reset: Vec<String>,
}

/// One frame of a probe, as the judge finds it on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SentFrame {
    pub opcode: u8,
    pub dest_qp: u32,
    pub psn: u32,
    pub len: usize,
}

/// The frames a probe step sent, to find them (and the answers) on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProbeSent {
    pub id: String,
    pub qp: String,
    /// The prober's and the target's addresses.
    pub src: String,
    pub dst: String,
    /// The prober's QPN (where the target's answers go).
    pub src_qp: u32,
    /// The PSN the target expected (as far as the prober knew) when it went out.
    pub next: u32,
    pub frames: Vec<SentFrame>,
}

/// A verb's refusal of a judged step: the verb, its errno, the agent's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Refusal {
    pub verb: String,
    pub errno: i32,
    pub message: String,
}

/// agent → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum FromAgent {
    Hello {
        version: u32,
        /// `roce` version and host name, for reports.
        agent: String,
        host: String,
        /// The kernel release (`uname -r`): what a device profile was recorded on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kernel: Option<String>,
    },
    Capabilities {
        device: String,
        features: Vec<Feature>,
    },
    SetupDone {
        device: String,
        port: u8,
        gid_index: u8,
        gid: String,
        /// The IPv4 (or IPv6) address of the GID: where peers connect.
        ip: String,
        qps: Vec<QpInfo>,
        mrs: Vec<MrInfo>,
        #[serde(default)]
        mws: Vec<MwInfo>,
        /// How long opening the device took, of the whole Setup (ms).
        #[serde(default)]
        open_ms: f64,
    },
    /// The counters' baseline is read: how many counters the port has.
    Baseline {
        counters: usize,
    },
    Listening {
        qp: String,
    },
    Connected {
        qp: String,
        local: QpInfo,
        remote: QpInfo,
        /// rdma_cm: how many of the peer's MRs came in its REQ/REP private data
        /// (the rest as the controller relayed them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer_mrs_from_cm: Option<usize>,
    },
    Done {
        index: usize,
        /// A probe step: what went out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        probe: Option<ProbeSent>,
        /// A bind step: the window's rkey now.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mw: Option<MwInfo>,
        /// A stream step: what it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<Box<StreamReport>>,
        /// A judged step the device refused: which verb, and its errno.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<Refusal>,
        /// A `query_qp` step: the state the device reports.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        qp_state: Option<QpStateName>,
        /// An `await_notify` step: whether the CQ's notification came.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notified: Option<bool>,
    },
    Completions {
        wcs: Vec<Wc>,
        /// Asynchronous events since `Setup`, in order.
        #[serde(default)]
        events: Vec<Event>,
    },
    Memory {
        mr: String,
        bytes: Hex,
    },
    /// Whether a stream's messages are in an MR as seeded.
    Verified {
        mr: String,
        result: Verification,
    },
    /// Every MR's guard regions, by name.
    Guards {
        mrs: BTreeMap<String, Guards>,
    },
    /// The capture runs: how (`libpcap on eth1`, or the command).
    Capturing {
        how: String,
    },
    /// The capture stopped: its size, the frames it holds and those the
    /// capturing host says it dropped, and whether it hit [`CAPTURE_MAX`].
    Captured {
        bytes: u64,
        frames: u64,
        dropped: u64,
        #[serde(default)]
        cut_short: bool,
    },
    /// Bytes of the stopped capture from `offset`: empty past its end.
    CaptureChunk {
        offset: u64,
        bytes: Hex,
    },
    /// Everything the scenario set up is freed; what the device's counters moved
    /// by since its `Setup` (none when the device has no counters to read).
    TornDown {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counters: Option<CounterDeltas>,
    },
    /// A request failed: which verb, errno, the likely cause; `unsupported` when
    /// the device lacks the verb (the scenario is then skipped, not failed).
    Error {
        message: String,
        #[serde(default)]
        verb: Option<String>,
        #[serde(default)]
        errno: Option<i32>,
        #[serde(default)]
        hint: Option<String>,
        #[serde(default)]
        unsupported: bool,
    },
}

impl FromAgent {
    /// An error that is not a verb's.
    pub(crate) fn error(message: impl Into<String>, hint: Option<&str>) -> FromAgent {
        FromAgent::Error {
            message: message.into(),
            verb: None,
            errno: None,
            hint: hint.map(str::to_string),
            unsupported: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QpInfo {
    pub name: String,
    pub qpn: u32,
    /// Starting send PSN.
    pub psn: u32,
    pub gid: String,
    #[serde(default)]
    pub qkey: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MrInfo {
    pub name: String,
    pub addr: u64,
    pub len: u64,
    pub rkey: u32,
    pub lkey: u32,
}

/// A memory window and its current rkey.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MwInfo {
    pub name: String,
    pub rkey: u32,
}

/// An asynchronous event, and the SRQ or QP (by scenario name) it is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Event {
    pub kind: EventType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srq: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp: Option<String>,
    /// Milliseconds since `Setup`.
    pub t_ms: f64,
}

/// One work completion as the agent polled it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Wc {
    pub wr_id: u64,
    pub status: WcStatus,
    /// Meaningful on success and for receives.
    pub opcode: WcOpcode,
    pub byte_len: u32,
    #[serde(default)]
    pub imm_data: Option<u32>,
    /// A SEND with Invalidate: the rkey it invalidated, and the window of this
    /// endpoint that had it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidated_rkey: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidated_mw: Option<String>,
    /// `wc_flags` as the provider set them (`IBV_WC_*` bits).
    #[serde(default)]
    pub flags: u32,
    /// The QP (by scenario name) the completion is for.
    pub qp: String,
    pub qp_num: u32,
    /// A UD QP's completion: `ibv_wc.src_qp`, on a receive the sender's QPN (the
    /// DETH's SrcQP). `None` on the other transports, where it means nothing.
    #[serde(default)]
    pub src_qp: Option<u32>,
    /// `ibv_wc.pkey_index` as the provider wrote it, whatever the QP: ibv_poll_cq(3)
    /// defines it for GSI QPs only, so what a device says elsewhere is for a
    /// scenario to find out. `None` from an agent that predates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pkey_index: Option<u16>,
    pub vendor_err: u32,
    /// Milliseconds since `Setup`.
    pub t_ms: f64,
}

/// Writes one message.
pub(crate) fn write_msg<W: Write + ?Sized, T: Serialize>(w: &mut W, msg: &T) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    if body.len() > MAX_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("message of {} bytes exceeds {MAX_MESSAGE}", body.len()),
        ));
    }
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf)?;
    w.flush()
}

/// Why a message could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The stream failed or ended inside a message.
    Io(io::Error),
    /// The length prefix is over the limit: the stream cannot be trusted further.
    TooLarge(usize),
    /// A complete message that is not valid: the stream is still in sync.
    Invalid(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::TooLarge(n) => {
                write!(f, "message of {n} bytes announced, more than the limit of {MAX_MESSAGE}")
            }
            ReadError::Invalid(e) => write!(f, "malformed message: {e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads one message; `Ok(None)` on a clean end of stream (between messages).
pub(crate) fn read_msg<R: Read + ?Sized, T: for<'de> Deserialize<'de>>(
    r: &mut R,
) -> Result<Option<T>, ReadError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(ReadError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "stream ended inside a length prefix",
                )))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    let n = u32::from_be_bytes(len) as usize;
    if n > MAX_MESSAGE {
        return Err(ReadError::TooLarge(n));
    }
    let mut body = vec![0u8; n];
    r.read_exact(&mut body).map_err(ReadError::Io)?;
    serde_json::from_slice(&body).map(Some).map_err(|e| ReadError::Invalid(e.to_string()))
}

/// A stream as the agent carries it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamOrder {
    pub id: String,
    /// Round robin: message `i` goes on `qps[i % qps.len()]`.
    pub qps: Vec<String>,
    pub verb: StreamVerb,
    pub content: StreamContent,
    /// The most messages outstanding at once, over all its QPs.
    pub window: u32,
    /// Every k-th message on a QP is signalled (and the last).
    pub signal_every: u32,
    /// The stream's start in a local MR.
    pub local_mr: String,
    pub local_offset: u64,
    /// The stream's start in the peer's MR (none for a SEND stream).
    pub remote: Option<RemoteRef>,
    /// How long it may take, all of it.
    pub within_ms: u64,
}

/// The receiving side of a SEND stream: `depth` receives posted on each QP (a
/// ring of slots of the longest message from `offset` in `mr`), reposted once no
/// more than `low_water` are left; message `q + k × qps` is the `k`-th to arrive
/// on QP `q`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReceiveOrder {
    pub id: String,
    pub qps: Vec<String>,
    pub content: StreamContent,
    pub depth: u32,
    pub low_water: u32,
    /// Where the SENDs land; none: the receives hold no bytes and complete with
    /// a WRITE's immediate, each message's index.
    pub mr: Option<String>,
    pub offset: u64,
    /// How long it may wait for all of them (2 s without a message, once they
    /// started coming, ends it too).
    pub within_ms: u64,
}

/// What a stream did, as its agent saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamReport {
    pub id: String,
    pub verb: StreamVerb,
    pub qps: usize,
    pub count: u64,
    pub posted: u64,
    /// Completed successfully (a signalled completion completes the unsignalled
    /// ones before it on its QP).
    pub completed: u64,
    pub bytes: u64,
    /// From the first post to the last completion.
    pub elapsed_us: u64,
    /// From posting a signalled message to its completion.
    pub latency_us: Option<Percentiles>,
    /// The first completion in error, its `wr_id` the message's index in the
    /// stream; the stream stopped posting there.
    pub failed: Option<Wc>,
    /// It ran out of its `within_ms` before every message completed.
    pub timed_out: bool,
    /// Time spent in `ibv_post_send`, all messages together: what the agent
    /// itself costs, apart from the device.
    #[serde(default)]
    pub post_ns: u64,
    /// The receiving side of a SEND stream: the first message that did not
    /// arrive as seeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<stream::Mismatch>,
    /// An atomic stream: the old values its atomics returned, checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atomics: Option<stream::AtomicChain>,
}

impl StreamReport {
    /// Messages a second, and gigabits a second of payload.
    pub(crate) fn rates(&self) -> (f64, f64) {
        let s = self.elapsed_us.max(1) as f64 / 1e6;
        (self.completed as f64 / s, self.bytes as f64 * 8.0 / s / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let mut buf = Vec::new();
        write_msg(&mut buf, &ToAgent::Hello { version: VERSION }).unwrap();
        write_msg(&mut buf, &ToAgent::Completions { min: 2, wait_ms: 100, grace_ms: None })
            .unwrap();
        let mut r = &buf[..];
        assert_eq!(
            read_msg::<_, ToAgent>(&mut r).unwrap(),
            Some(ToAgent::Hello { version: VERSION })
        );
        assert_eq!(
            read_msg::<_, ToAgent>(&mut r).unwrap(),
            Some(ToAgent::Completions { min: 2, wait_ms: 100, grace_ms: None })
        );
        assert!(read_msg::<_, ToAgent>(&mut r).unwrap().is_none());

        let huge = ((MAX_MESSAGE + 1) as u32).to_be_bytes();
        assert!(matches!(read_msg::<_, ToAgent>(&mut &huge[..]), Err(ReadError::TooLarge(_))));
        let mut bad = Vec::new();
        bad.extend_from_slice(&5u32.to_be_bytes());
        bad.extend_from_slice(b"{\"x\":");
        let e = read_msg::<_, ToAgent>(&mut &bad[..]).unwrap_err();
        assert!(matches!(e, ReadError::Invalid(_)), "{e}");
        let mut unknown = Vec::new();
        write_msg(&mut unknown, &serde_json::json!({"msg": "format_disk"})).unwrap();
        assert!(matches!(read_msg::<_, ToAgent>(&mut &unknown[..]), Err(ReadError::Invalid(_))));
        assert!(matches!(read_msg::<_, ToAgent>(&mut &[0u8, 0][..]), Err(ReadError::Io(_))));
    }

    /// Every message reads back as itself (the hex of bytes included).
    #[test]
    fn messages_survive_the_wire() {
        let msgs = vec![
            ToAgent::Setup(Setup::example()),
            ToAgent::Capabilities { device: Some("rxe0".into()) },
            ToAgent::Do {
                index: 1,
                action: Action::Post {
                    qp: "q".into(),
                    wr_id: 1,
                    verb: Verb::Flush {
                        remote: RemoteRef { mr: "t".into(), offset: 0, rkey: None, mw: None },
                        len: 64,
                        placement: Placement::Global,
                        level: Selectivity::Range,
                    },
                    sges: vec![],
                    flags: vec![],
                },
                judged: false,
            },
            ToAgent::Do {
                index: 2,
                action: Action::Post {
                    qp: "q".into(),
                    wr_id: 2,
                    verb: Verb::BindMw {
                        mw: "w".into(),
                        mr: "m".into(),
                        offset: 8,
                        len: 16,
                        access: Access(2),
                    },
                    sges: vec![],
                    flags: vec![],
                },
                judged: false,
            },
            ToAgent::Do {
                index: 3,
                action: Action::ArmSrq { srq: "s".into(), limit: 2 },
                judged: false,
            },
            ToAgent::Do {
                index: 4,
                action: Action::ModifyQp {
                    qp: "q".into(),
                    state: QpStateName::SQD,
                    state_only: true,
                    access: Some(Access(4)),
                },
                judged: true,
            },
            ToAgent::Do { index: 5, action: Action::QueryQp { qp: "q".into() }, judged: true },
            ToAgent::Do {
                index: 6,
                action: Action::ReregMr { mr: "m".into(), access: Access(1) },
                judged: true,
            },
            ToAgent::Do { index: 7, action: Action::AwaitNotify { within_ms: 300 }, judged: true },
            ToAgent::Do {
                index: 3,
                action: Action::Post {
                    qp: "q".into(),
                    wr_id: 7,
                    verb: Verb::CmpSwap {
                        remote: RemoteRef {
                            mr: "t".into(),
                            offset: 8,
                            rkey: Some(0xbad),
                            mw: None,
                        },
                        compare: 1,
                        swap: 2,
                    },
                    sges: vec![SgeRef { mr: "m".into(), offset: 0, len: 8, outside_mr: false }],
                    flags: vec![SendFlag::Fence],
                },
                judged: false,
            },
        ];
        for m in msgs {
            let mut buf = Vec::new();
            write_msg(&mut buf, &m).unwrap();
            assert_eq!(read_msg::<_, ToAgent>(&mut &buf[..]).unwrap(), Some(m));
        }
        let mem: FromAgent =
            serde_json::from_str(r#"{"msg":"memory","mr":"m","bytes":"00ff10"}"#).unwrap();
        assert_eq!(mem, FromAgent::Memory { mr: "m".into(), bytes: Hex(vec![0, 0xff, 0x10]) });
        assert!(
            serde_json::from_str::<FromAgent>(r#"{"msg":"memory","mr":"m","bytes":"0"}"#).is_err(),
            "odd hex is refused"
        );
        assert_eq!(Fill::Repeat(Hex(vec![1, 2])).bytes(5), [1, 2, 1, 2, 1]);
        let caps: FromAgent = serde_json::from_str(
            r#"{"msg":"capabilities","device":"rxe0","features":["flush","srq"]}"#,
        )
        .unwrap();
        assert_eq!(
            caps,
            FromAgent::Capabilities {
                device: "rxe0".into(),
                features: vec![Feature::Flush, Feature::Srq]
            }
        );
        assert!(
            serde_json::from_str::<FromAgent>(
                r#"{"msg":"capabilities","device":"rxe0","features":["teleport"]}"#
            )
            .is_err(),
            "an unknown feature is refused"
        );
        // A completion of a SEND with Invalidate says which rkey (and window) it hit;
        // one without leaves the keys out.
        let wc = Wc {
            wr_id: 1,
            status: WcStatus(0),
            opcode: WcOpcode(128),
            byte_len: 4,
            imm_data: None,
            invalidated_rkey: Some(0x1234),
            invalidated_mw: Some("w".into()),
            flags: 0x9,
            qp: "q".into(),
            qp_num: 17,
            src_qp: None,
            pkey_index: None,
            vendor_err: 0,
            t_ms: 1.0,
        };
        let j = serde_json::to_string(&FromAgent::Completions {
            wcs: vec![wc.clone()],
            events: vec![],
        })
        .unwrap();
        assert!(
            j.contains("\"invalidated_rkey\":4660") && j.contains("\"invalidated_mw\":\"w\""),
            "{j}"
        );
        let plain =
            serde_json::to_string(&Wc { invalidated_rkey: None, invalidated_mw: None, ..wc })
                .unwrap();
        assert!(!plain.contains("invalidated"), "{plain}");
        assert_eq!(Fill::Bytes(Hex(vec![1, 2])).bytes(1), [1]);
    }
}
