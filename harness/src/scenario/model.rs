//! The scenario format: what two endpoints set up, the verbs they post, and what must
//! happen (completions, wire, memory). These are the plain data types, shared by the
//! parser (`roce check`, with spans for errors), the controller (`roce run`) and the
//! endpoint agent (`roce agent`), which receives the parts it executes as JSON.
//!
//! A scenario file, in short:
//!
//! ```toml
//! name = "RC SEND over a TCP exchange"
//! [endpoints.a]                 # `vm` defaults to the endpoint's name (lab VM a / b)
//! [endpoints.b]
//! [[qp]]                        # one QP on each endpoint of `between`, connected
//! name = "q"
//! type = "rc"                   # rc | uc | ud
//! between = ["a", "b"]          # the first listens (passive side), the second connects
//! connect = "tcp"               # tcp (out-of-band exchange, as perftest) | rdma_cm
//! [[mr]]
//! name = "rbuf"
//! on = "b"
//! size = 64
//! access = ["local_write"]
//! [[mr]]
//! name = "msg"
//! on = "a"
//! size = 64
//! init = { text = "hello" }
//! [[step]]
//! on = "b"
//! op = "post_recv"
//! qp = "q"
//! wr_id = 1
//! sge = [{ mr = "rbuf" }]
//! [[step]]
//! on = "a"
//! op = "send"
//! qp = "q"
//! wr_id = 2
//! sge = [{ mr = "msg", len = 5 }]
//! [[expect.completion]]
//! on = "b"
//! wr_id = 1
//! status = "IBV_WC_SUCCESS"
//! opcode = "IBV_WC_RECV"
//! byte_len = 5
//! [[expect.wire]]
//! qp = "q"
//! from = "a"
//! sequence = ["SEND Only"]
//! [[expect.memory]]
//! on = "b"
//! mr = "rbuf"
//! equals = { text = "hello" }
//! ```
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A whole scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// By name (`a`, `b`, or any name with `vm` set).
    pub endpoints: BTreeMap<String, Endpoint>,
    #[serde(default, rename = "qp")]
    pub qps: Vec<QpSpec>,
    #[serde(default, rename = "mr")]
    pub mrs: Vec<MrSpec>,
    #[serde(default, rename = "step")]
    pub steps: Vec<Step>,
    #[serde(default)]
    pub expect: Expectations,
    /// Faults the lab switch applies to this scenario's wire (lab only).
    #[serde(default, rename = "fault")]
    pub faults: Vec<FaultSpec>,
    /// Whole-scenario deadline in milliseconds (default 30 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The deadline of a scenario that sets no `timeout_ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// How long a probe step waits for the answer when it sets no `settle_ms`.
pub const DEFAULT_SETTLE_MS: u64 = 20;
/// The longest a probe step may wait: answers come within milliseconds and a
/// requester's retry timer within seconds; minutes are a typo.
pub const MAX_SETTLE_MS: u64 = 10_000;

/// A fault on the wire, applied by the lab switch while the scenario runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// A rule in `roce lab run --fault` syntax, without `dir`/`qp` (use `from` and
    /// `qp`): `drop op=write-middle nth=1`, `drop psn=101 nth=2` (the 2nd
    /// transmission of PSN 101), `corrupt-icrc psn=101`, `ce op=send-only`,
    /// `dup op=write-only copies=1`, `reorder psn=101`, `delay ms=20`. PSNs are
    /// absolute: set the QP's `psn` to make them known.
    pub rule: String,
    /// Only frames this endpoint sends.
    #[serde(default)]
    pub from: Option<String>,
    /// Only frames of this QP pair (to the receiving end's QPN, learned at setup).
    #[serde(default)]
    pub qp: Option<String>,
}

/// Where an endpoint runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Lab VM (`a` or `b`); defaults to the endpoint's name. Two endpoints on the same
    /// VM share its rxe device: their traffic never reaches the wire.
    #[serde(default)]
    pub vm: Option<String>,
    /// RDMA device (default: the first one, `rxe0` in the lab).
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub port: Option<u8>,
    /// GID index (default: the port's IPv4-mapped RoCEv2 GID).
    #[serde(default)]
    pub gid_index: Option<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QpType {
    Rc,
    Uc,
    Ud,
}

impl QpType {
    /// The transport of its BTH opcodes.
    pub fn transport(self) -> dissector::wire::Transport {
        match self {
            QpType::Rc => dissector::wire::Transport::Rc,
            QpType::Uc => dissector::wire::Transport::Uc,
            QpType::Ud => dissector::wire::Transport::Ud,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConnectMethod {
    /// QPN, PSN, GID (and the MRs' addresses and rkeys) exchanged over a TCP socket
    /// between the endpoints, as perftest and the pingpong examples do.
    #[default]
    Tcp,
    /// librdmacm: listen / resolve / connect / accept; the MR table rides in the
    /// private data.
    RdmaCm,
}

/// `ibv_access_flags` by name (`IBV_ACCESS_` prefix optional, any case):
/// local_write, remote_write, remote_read, remote_atomic.
pub type AccessFlags = Vec<String>;

/// A value that may differ per endpoint: `x` or `{ a = x, b = y }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum PerEndpoint<T> {
    Same(T),
    Each(BTreeMap<String, T>),
}

impl<T: Clone> PerEndpoint<T> {
    pub fn get(&self, endpoint: &str) -> Option<T> {
        match self {
            PerEndpoint::Same(v) => Some(v.clone()),
            PerEndpoint::Each(m) => m.get(endpoint).cloned(),
        }
    }
}

/// A connected QP pair (RC/UC) or two UD QPs that know each other's address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QpSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub qp_type: QpType,
    /// The two endpoints; the first is the passive side (listens).
    pub between: [String; 2],
    #[serde(default)]
    pub connect: ConnectMethod,
    /// Path MTU in bytes: 256, 512, 1024, 2048, 4096 (default 1024).
    #[serde(default)]
    pub mtu: Option<u32>,
    /// Starting send PSN per endpoint (default random).
    #[serde(default)]
    pub psn: Option<PerEndpoint<u32>>,
    /// Local ACK timeout exponent (4.096 µs × 2^timeout; default 14).
    #[serde(default)]
    pub timeout: Option<u8>,
    #[serde(default)]
    pub retry_cnt: Option<u8>,
    #[serde(default)]
    pub rnr_retry: Option<u8>,
    /// IBA RNR timer code 0–31 (default 12 = 0.64 ms).
    #[serde(default)]
    pub min_rnr_timer: Option<u8>,
    #[serde(default)]
    pub max_rd_atomic: Option<u8>,
    #[serde(default)]
    pub max_dest_rd_atomic: Option<u8>,
    /// `qp_access_flags` (default: remote_write, remote_read, remote_atomic).
    #[serde(default)]
    pub access: Option<PerEndpoint<AccessFlags>>,
    /// UD Q_Key (default 0x11111111).
    #[serde(default)]
    pub qkey: Option<u32>,
    /// Queue depths (default 16) and SGEs per WR (default 4).
    #[serde(default)]
    pub max_send_wr: Option<u32>,
    #[serde(default)]
    pub max_recv_wr: Option<u32>,
    #[serde(default)]
    pub max_sge: Option<u32>,
    #[serde(default)]
    pub max_inline: Option<u32>,
}

/// A memory region on one endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MrSpec {
    pub name: String,
    pub on: String,
    pub size: u64,
    /// `ibv_access_flags` (default: local_write only).
    #[serde(default)]
    pub access: Option<AccessFlags>,
    /// Initial content (the rest is zero); default all zero.
    #[serde(default)]
    pub init: Option<Content>,
}

/// Bytes given as text, hex bytes, or a repeated pattern.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum Content {
    /// UTF-8 text.
    Text(String),
    /// Hex bytes, whitespace allowed: "de ad be ef".
    Bytes(String),
    /// Hex bytes repeated to the length in question: "ab" or "00 01 02 03".
    Pattern(String),
    /// A little-endian u64 (atomics).
    U64(u64),
}

/// A scatter/gather element: a slice of an MR (default: from 0, the whole MR).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sge {
    pub mr: String,
    #[serde(default)]
    pub offset: u64,
    #[serde(default)]
    pub len: Option<u32>,
}

/// The remote end of an RDMA or atomic operation: an MR of the peer endpoint, by
/// name (its address and rkey were exchanged at connect time), optionally with a
/// raw rkey to provoke errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Remote {
    pub mr: String,
    #[serde(default)]
    pub offset: u64,
    /// Override the exchanged rkey (an unknown rkey → NAK Remote Access Error).
    #[serde(default)]
    pub rkey: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    PostRecv,
    Send,
    SendImm,
    Write,
    WriteImm,
    Read,
    CmpSwap,
    FetchAdd,
    /// Wait until both endpoints reach this point (the controller orders steps).
    Sync,
    Sleep,
    /// Wait for `count` completions on `on`'s CQ (up to `within_ms`).
    WaitCompletions,
    /// Send a crafted packet (`probe = { … }`): `on` builds it itself and sends it
    /// on its interface, in the name of its QP `qp`, to the QP at the other end.
    Probe,
}

/// One step, executed in order. `on` names the endpoint (not for `sync`/`sleep`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub op: Op,
    #[serde(default)]
    pub on: Option<String>,
    #[serde(default)]
    pub qp: Option<String>,
    #[serde(default)]
    pub wr_id: Option<u64>,
    #[serde(default)]
    pub sge: Vec<Sge>,
    #[serde(default)]
    pub remote: Option<Remote>,
    /// signaled (default for send-side ops), unsignaled, inline, solicited, fence.
    #[serde(default)]
    pub flags: Vec<String>,
    #[serde(default)]
    pub imm_data: Option<u32>,
    /// cmp_swap: compare; fetch_add: add.
    #[serde(default)]
    pub compare: Option<u64>,
    #[serde(default)]
    pub swap: Option<u64>,
    #[serde(default)]
    pub add: Option<u64>,
    /// UD: the peer endpoint whose QP receives (default: the other end of `qp`).
    #[serde(default)]
    pub to: Option<String>,
    /// sleep
    #[serde(default)]
    pub ms: Option<u64>,
    /// wait_completions
    #[serde(default)]
    pub count: Option<u32>,
    #[serde(default)]
    pub within_ms: Option<u64>,
    /// probe: the crafted packet.
    #[serde(default)]
    pub probe: Option<Box<ProbeSpec>>,
}

/// A BTH opcode: its name as `roce decode` prints it, with or without the transport
/// (`"RDMA WRITE Only"`, `"UD SEND Only"`), or its number (`0x0a` = 10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OpcodeRef {
    Number(u8),
    Name(String),
}

/// A PSN: `"next"` (the PSN the target expects, as far as the prober knows),
/// `"next+N"` / `"next-N"` (ahead of it, or already used: a duplicate), or an
/// absolute 24-bit PSN.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum PsnRef {
    Absolute(u32),
    Relative(String),
}

impl PsnRef {
    /// The offset from `next` (`Ok(Err(psn))` for an absolute PSN).
    pub fn offset(&self) -> Result<Result<i64, u32>, String> {
        match self {
            PsnRef::Absolute(p) if *p <= 0x00ff_ffff => Ok(Err(*p)),
            PsnRef::Absolute(p) => Err(format!("PSN {p} is more than 24 bits")),
            PsnRef::Relative(s) => {
                let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
                let Some(rest) = t.strip_prefix("next") else {
                    return Err(format!("`{s}` is not a PSN: say \"next\", \"next+N\", \"next-N\" or a number"));
                };
                if rest.is_empty() {
                    return Ok(Ok(0));
                }
                let (sign, n) = match rest.split_at(1) {
                    ("+", n) => (1, n),
                    ("-", n) => (-1, n),
                    _ => return Err(format!("`{s}` is not a PSN: say \"next\", \"next+N\", \"next-N\" or a number")),
                };
                let n: i64 = n.parse().map_err(|_| format!("`{s}`: `{n}` is not a number"))?;
                if n > 0x7f_ffff {
                    return Err(format!("`{s}`: more than half the 24-bit PSN space away"));
                }
                Ok(Ok(sign * n))
            }
        }
    }

    /// The PSN, given what `next` is.
    pub fn resolve(&self, next: u32) -> Result<u32, String> {
        Ok(match self.offset()? {
            Ok(off) => ((next as i64 + off).rem_euclid(1 << 24)) as u32,
            Err(abs) => abs,
        })
    }
}

/// A crafted packet: BTH, the extension headers its opcode calls for, payload and
/// ICRC, built by the dissector's emit side and sent raw (pnet) on the endpoint's
/// interface. Fields the opcode has no header for are refused by `roce check`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Names the probe for `[[expect.probe]]`, the report and the profile.
    pub id: String,
    pub opcode: OpcodeRef,
    /// Default `"next"`.
    #[serde(default)]
    pub psn: Option<PsnRef>,
    /// Whether `next` moves on by one after this probe (default: when it was sent
    /// at `"next"`). Say `false` for a probe the target should drop, so the next
    /// probe is sent at the PSN the target still expects.
    #[serde(default)]
    pub moves_next: Option<bool>,
    /// RETH / AtomicETH: an MR of the target (its address and rkey as exchanged),
    /// at an offset; `rkey` overrides.
    #[serde(default)]
    pub remote: Option<Remote>,
    /// RETH DMA length (default: the payload's length).
    #[serde(default)]
    pub dma_len: Option<u32>,
    /// Payload bytes (default: `len` zero bytes, or none).
    #[serde(default)]
    pub payload: Option<Content>,
    /// Payload length (a `pattern` payload is repeated to it).
    #[serde(default)]
    pub len: Option<u32>,
    #[serde(default)]
    pub imm_data: Option<u32>,
    /// Atomics: compare (CmpSwap), swap or add.
    #[serde(default)]
    pub compare: Option<u64>,
    #[serde(default)]
    pub swap: Option<u64>,
    #[serde(default)]
    pub add: Option<u64>,
    /// BTH AckReq (default: set).
    #[serde(default)]
    pub ack_req: Option<bool>,
    /// Send it with a wrong ICRC.
    #[serde(default)]
    pub bad_icrc: Option<bool>,
    /// BTH P_Key (default 0xffff, the default partition).
    #[serde(default)]
    pub p_key: Option<u16>,
    /// BTH DestQP (default: the QPN of the target's QP).
    #[serde(default)]
    pub dest_qp: Option<u32>,
    /// DETH Q_Key, for UD opcodes (default 0x11111111).
    #[serde(default)]
    pub q_key: Option<u32>,
    /// Identical copies to send back to back (default 1).
    #[serde(default)]
    pub copies: Option<u32>,
    /// How long to wait after sending, for the answer to be on the wire before the
    /// next step (default 20 ms).
    #[serde(default)]
    pub settle_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    #[serde(default)]
    pub completion: Vec<CompletionExpect>,
    #[serde(default)]
    pub wire: Vec<WireExpect>,
    #[serde(default)]
    pub memory: Vec<MemoryExpect>,
    #[serde(default)]
    pub probe: Vec<ProbeExpect>,
}

/// What the target sent back to a probe: its responses on the wire from the probe
/// to the next request the prober sends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeExpect {
    /// The probe's `id`.
    pub probe: String,
    /// The responses in order, named as in `[[expect.wire]]` (`"ACK"`, `"NAK PSN
    /// Sequence Error"`, `"READ Response Only"`, …, `*`/`+` suffixes); `[]`: none
    /// at all (dropped).
    #[serde(default)]
    pub responses: Option<Vec<String>>,
    /// The PSN the first response carries, relative to `next` when the probe went
    /// out (a NAK PSN Sequence Error names the PSN the target expected: `"next"`).
    #[serde(default)]
    pub psn: Option<PsnRef>,
    /// The first response within this many ms of the probe.
    #[serde(default)]
    pub within_ms: Option<u64>,
}

/// A work completion on `on`: the one for `wr_id`, or the `index`-th (from 0) in the
/// order they were polled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletionExpect {
    pub on: String,
    #[serde(default)]
    pub wr_id: Option<u64>,
    #[serde(default)]
    pub index: Option<usize>,
    /// `IBV_WC_SUCCESS`, `IBV_WC_REM_ACCESS_ERR`, … (prefix optional).
    #[serde(default)]
    pub status: Option<String>,
    /// `IBV_WC_SEND`, `IBV_WC_RECV`, `IBV_WC_RDMA_WRITE`, `IBV_WC_RECV_RDMA_WITH_IMM`, …
    #[serde(default)]
    pub opcode: Option<String>,
    #[serde(default)]
    pub byte_len: Option<u32>,
    #[serde(default)]
    pub imm_data: Option<u32>,
    /// The total number of completions `on` sees.
    #[serde(default)]
    pub count: Option<usize>,
    #[serde(default)]
    pub within_ms: Option<u64>,
}

/// What the wire shows for one QP pair, in one direction of requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireExpect {
    pub qp: String,
    /// The endpoint whose QP sends the requests.
    pub from: String,
    /// Request opcodes in order, by name without the transport ("SEND Only",
    /// "RDMA WRITE First"); a `*` suffix means any number (0+), `+` one or more.
    #[serde(default)]
    pub sequence: Option<Vec<String>>,
    /// The responses (from the other side) in order: "ACK", "NAK Remote Access Error",
    /// "RNR NAK", "READ Response Only", "Atomic ACK", … with the same `*`/`+`.
    #[serde(default)]
    pub responses: Option<Vec<String>>,
    /// NAK codes that must appear (`remote_access_error`, `invalid_request`,
    /// `psn_sequence_error`, `remote_operational_error`, `rnr`).
    #[serde(default)]
    pub naks: Option<Vec<String>>,
    #[serde(default)]
    pub min_rnr_naks: Option<u64>,
    #[serde(default)]
    pub retransmissions: Option<u64>,
    /// Every ICRC on this QP pair valid (default true).
    #[serde(default)]
    pub icrc_valid: Option<bool>,
    /// Nothing on the wire for this QP pair at all (loopback, or a refused post).
    #[serde(default)]
    pub empty: Option<bool>,
    /// Go-back-N recovery done right (IBA 9.7.5): the responder's ACK/NAK PSNs
    /// never move back; after a NAK PSN Sequence Error the requester resends from
    /// the NAK'd PSN; a resend never starts at a PSN already acknowledged; and
    /// every request PSN was delivered in the end.
    #[serde(default)]
    pub go_back_n: Option<bool>,
    /// A CNP (opcode 0x81) from the responder after a CE-marked request (true), or
    /// none (false).
    #[serde(default)]
    pub cnp: Option<bool>,
    /// Each resend starts within this many ms of what triggered it (the NAK, or
    /// the original transmission when the ACK timer fired).
    #[serde(default)]
    pub retransmit_within_ms: Option<u64>,
}

/// An MR's content at the end of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryExpect {
    pub on: String,
    pub mr: String,
    #[serde(default)]
    pub offset: u64,
    #[serde(default)]
    pub equals: Option<Content>,
    /// Equal to its initial content.
    #[serde(default)]
    pub unchanged: Option<bool>,
}
