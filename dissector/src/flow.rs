//! Per-QP flow analysis over a stream of decoded frames.
//!
//! A *flow* is one direction of traffic to one QP: (source address, destination
//! address, destination QP; plus the DETH source QP for UD). For RC and UC each flow
//! carries the requests of one side and the responses of the other, so a flow's
//! *requests* are answered in its *paired* flow (the reverse direction). Pairs come
//! from CM REQ/REP MADs when the capture holds them, else from the PSNs: an ACK for
//! PSN p belongs to the reverse flow whose requests reached p.
//!
//! What is measured per flow: packets, bytes, opcode counts, messages reassembled
//! (First…Last, Only) by kind, PSN range, gaps, out-of-order and retransmitted
//! requests (24-bit wrap), ACKs and how many requests each covers (coalescing), every
//! NAK and RNR NAK tied to the request PSN it answers, ACK and READ response latency,
//! ACK PSNs that move backwards (go-back-N violations), ECN CE marks, CNPs, ICRC
//! failures. Memory is bounded per flow (fixed windows and histograms; events capped).
//!
//! Owns: flows, their keys and counters, CM pairing, and the [`Analyzer`] that feeds
//! them. Imports: the decoded frame ([`crate::frame`]), the wire vocabulary (opcode kinds,
//! PSNs, syndromes, MADs) and the link type. Its children: `facts` (what a packet
//! tells the analyzer, decoded or parsed directly), [`pace`] and [`recovery`] (which read
//! only the wire vocabulary), and `report` (which reads the flows; nothing here reads it).

use std::hash::Hasher;
use std::net::IpAddr;

use serde::Serialize;

use crate::frame::{self, Frame};
use crate::wire::aeth::{AckKind, NakCode};
use crate::wire::opcode::Kind;
use crate::wire::{mad, Opcode, Psn, Transport};
use crate::LinkType;

mod facts;
pub mod pace;
pub mod recovery;
mod report;
pub use facts::{Facts, Seen};
pub use report::{FlowReport, Report};

/// At most this many NAK / gap events are kept per flow (all are counted).
pub const MAX_EVENTS: usize = 64;
/// PSNs remembered per flow for duplicate detection (a power of two).
const WINDOW: usize = 4096;
/// Requests remembered per flow for latency and NAK attribution (a power of two;
/// small enough that many flows' windows stay in cache).
const SENT: usize = 1024;

/// The per-packet lookups (request by PSN, flow by key, CM announcements) hash
/// small integer keys: rustc's Fx hash (rustc-hash), not SipHash, whose
/// resistance to chosen keys a lookup table indexed by a capture does not need.
type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// Identifies a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlowKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dest_qp: u32,
    /// UD and MADs: the DETH source QP; `u32::MAX` otherwise.
    pub src_qp: u32,
}

impl std::hash::Hash for FlowKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let bits = |a: IpAddr| match a {
            IpAddr::V4(v) => u32::from(v) as u128,
            IpAddr::V6(v) => u128::from(v) ^ (1 << 127),
        };
        let (s, d) = (bits(self.src), bits(self.dst));
        h.write_u64((s as u64) ^ ((s >> 64) as u64).rotate_left(17));
        h.write_u64((d as u64) ^ ((d >> 64) as u64).rotate_left(17));
        h.write_u64((self.dest_qp as u64) << 32 | self.src_qp as u64);
    }
}

/// A log-linear latency histogram: exact min/max, median within 1/64 (1.6 %).
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    buckets: Vec<u32>,
    pub count: u64,
    pub min: u64,
    pub max: u64,
}

const SUB: u32 = 64;

impl Histogram {
    fn index(v: u64) -> usize {
        if v < 2 * SUB as u64 {
            return v as usize;
        }
        let e = 63 - v.leading_zeros(); // ≥ 7
        let m = (v >> (e - 6)) & (SUB as u64 - 1);
        (2 * SUB + (e - 7) * SUB) as usize + m as usize
    }
    /// Lower bound and width of bucket `i`.
    fn bounds(i: usize) -> (u64, u64) {
        if i < 2 * SUB as usize {
            return (i as u64, 1);
        }
        let j = i - 2 * SUB as usize;
        let e = j as u32 / SUB + 7;
        let m = (j as u32 % SUB) as u64;
        let w = 1u64 << (e - 6);
        ((SUB as u64 + m) * w, w)
    }
    pub fn record(&mut self, v: u64) {
        let i = Self::index(v);
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, 0);
        }
        self.buckets[i] += 1;
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        self.count += 1;
    }
    /// The median (bucket midpoint, clamped to [min, max]); `None` when empty.
    pub fn median(&self) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let want = self.count.div_ceil(2);
        let mut seen = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n as u64;
            if seen >= want {
                let (lo, w) = Self::bounds(i);
                return Some((lo + w / 2).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }
    fn summary(&self) -> Option<LatencySummary> {
        Some(LatencySummary {
            samples: self.count,
            min_ns: self.min,
            median_ns: self.median()?,
            max_ns: self.max,
        })
    }
}

/// Latency figures for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LatencySummary {
    pub samples: u64,
    pub min_ns: u64,
    pub median_ns: u64,
    pub max_ns: u64,
}

/// An ACK for a PSN the requester has not sent (yet): IBA calls it a ghost; a
/// requester must ignore it. Also what a capture that missed requests looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GhostAck {
    pub frame: u64,
    pub psn: u32,
    /// The next PSN the requester would have sent.
    pub next_psn: u32,
}

/// A NAK or RNR NAK, tied to the request it answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NakEvent {
    /// Frame number of the NAK.
    pub frame: u64,
    pub psn: u32,
    /// `NAK Remote Access Error`, `RNR NAK timer=12 (0.64 ms)`, …
    pub syndrome: String,
    pub syndrome_value: u8,
    /// Frame number of the (latest transmission of the) request with that PSN.
    pub request_frame: Option<u64>,
    /// What the requester's work completion will say, for NAKs that end the QP.
    pub wc_status: Option<&'static str>,
}

/// A hole in the request PSN sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GapEvent {
    pub frame: u64,
    pub expected: u32,
    pub got: u32,
    pub missing: u32,
}

/// Messages of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MsgCount {
    pub messages: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The PSN, with bit 31 set once the slot holds a request.
    psn: u32,
    ts: u64,
    frame: u64,
}

const SLOT_USED: u32 = 1 << 31;

/// The counters of one flow (and its request PSN range): what the analysis adds up
/// per packet, and what [`FlowReport`] shows as they are (its JSON keys, flattened, in
/// this order). The rest of [`Flow`] is state, or figures the report transforms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FlowCounters {
    pub packets: u64,
    pub bytes: u64,
    pub payload_bytes: u64,
    // Requests carried by this flow.
    pub requests: u64,
    pub psn_first: Option<u32>,
    /// Highest request PSN seen (end of any READ range not included).
    pub psn_last: Option<u32>,
    pub gaps: u64,
    pub missing_psns: u64,
    pub out_of_order: u64,
    pub retransmissions: u64,
    // Messages reassembled, from the responder's point of view.
    pub sends: MsgCount,
    pub writes: MsgCount,
    pub reads: MsgCount,
    pub atomics: MsgCount,
    pub largest_message: u64,
    /// Middle/Last without a First, or a First while a message was open.
    pub broken_messages: u64,
    pub ack_req: u64,
    // Responses *to* this flow's requests (carried in the paired flow).
    pub acks: u64,
    /// ACKs that acknowledged more than one request packet.
    pub coalesced_acks: u64,
    pub acked_packets: u64,
    pub naks: u64,
    pub rnr_naks: u64,
    /// ACKs whose PSN moved backwards (go-back-N violation) — not counting NAK'd resends.
    pub ack_regressions: u64,
    // Congestion and integrity.
    pub ecn_ce: u64,
    pub fecn: u64,
    pub becn: u64,
    pub cnps: u64,
    pub icrc_checked: u64,
    pub icrc_bad: u64,
}

/// The state and counters of one flow.
#[derive(Debug, Clone)]
pub struct Flow {
    pub key: FlowKey,
    pub transport: Transport,
    pub first_frame: u64,
    pub first_ts: u64,
    pub last_ts: u64,
    /// The counters the report shows as they are, and the request PSN range.
    pub counters: FlowCounters,
    opcodes: Box<[u32; 256]>,
    // Request sequence.
    next_psn: Option<Psn>,
    /// A READ request lets the next request PSN jump ahead by up to this much.
    read_slack: u32,
    seen: Box<[u64; WINDOW / 64]>,
    sent: Box<[Slot; SENT]>,
    pub gap_events: Vec<GapEvent>,
    // Message reassembly, from the responder's point of view.
    msg_open: Option<(Kind, u64)>,
    epsn: Option<Psn>,
    epsn_slack: u32,
    // Responses *to* this flow's requests (carried in the paired flow).
    pub nak_events: Vec<NakEvent>,
    pub ghost_acks: Vec<GhostAck>,
    last_acked: Option<Psn>,
    pub ack_latency: Histogram,
    pub read_latency: Histogram,
    pub snapped: u64,
    pub paired: Option<usize>,
    pub paired_by: Option<&'static str>,
}

/// A zeroed boxed array built on the heap: `Box::new([x; N])` builds it on the stack
/// first, and a 24 KiB temporary made every caller probe its stack pages per packet.
fn boxed<T: Clone, const N: usize>(x: T) -> Box<[T; N]> {
    match vec![x; N].into_boxed_slice().try_into() {
        Ok(b) => b,
        Err(_) => unreachable!("a vec of N elements is an array of N"),
    }
}

/// How many PSNs past a request its responses may use: a READ's responses use PSNs
/// psn .. psn+n-1, n = ceil(len / PMTU), PMTU ≥ 256; a READ whose RETH was not
/// captured may have used any number.
fn read_slack(op: Kind, dma_len: Option<u32>) -> u32 {
    match (op.contains(Kind::READ), dma_len) {
        (false, _) => 0,
        (true, Some(len)) => (len as u64).div_ceil(256).saturating_sub(1) as u32,
        (true, None) => 0x7F_FFFF,
    }
}

impl Flow {
    /// Out of line: a new flow is rare, and its code would bloat every packet's path.
    #[cold]
    #[inline(never)]
    fn new(key: FlowKey, transport: Transport, frame: u64, ts: u64) -> Flow {
        Flow {
            key,
            transport,
            first_frame: frame,
            first_ts: ts,
            last_ts: ts,
            counters: FlowCounters::default(),
            opcodes: boxed(0),
            next_psn: None,
            read_slack: 0,
            seen: boxed(0),
            sent: boxed(Slot::default()),
            gap_events: Vec::new(),
            msg_open: None,
            epsn: None,
            epsn_slack: 0,
            nak_events: Vec::new(),
            ghost_acks: Vec::new(),
            last_acked: None,
            ack_latency: Histogram::default(),
            read_latency: Histogram::default(),
            snapped: 0,
            paired: None,
            paired_by: None,
        }
    }

    /// (opcode, count) for every opcode seen, in numeric order.
    pub fn opcode_counts(&self) -> impl Iterator<Item = (Opcode, u32)> + '_ {
        self.opcodes.iter().enumerate().filter(|(_, &n)| n > 0).map(|(o, &n)| (Opcode(o as u8), n))
    }

    /// An opcode's name in this flow: a DC flow's RD-range opcodes are DC's.
    fn opcode_name(&self, o: Opcode) -> String {
        match (self.transport, o.dc_info(false)) {
            (Transport::Dc, Some(i)) => i.to_string(),
            (Transport::Dc, None) => format!("DC Unknown ({:#04x})", o.0),
            _ => o.to_string(),
        }
    }

    fn seen(&self, p: Psn) -> Option<bool> {
        let last = Psn::new(self.counters.psn_last?);
        let back = last.diff(p);
        if back < 0 || back as usize >= WINDOW {
            return None;
        }
        let i = p.value() as usize % WINDOW;
        Some(self.seen[i / 64] & (1 << (i % 64)) != 0)
    }

    fn mark(&mut self, p: Psn) {
        let i = p.value() as usize % WINDOW;
        self.seen[i / 64] |= 1 << (i % 64);
    }

    /// Advances the highest PSN to `p`, clearing the window slots it passes.
    fn advance(&mut self, p: Psn) {
        match self.counters.psn_last {
            None => self.seen.iter_mut().for_each(|w| *w = 0),
            Some(last) => {
                let d = p.diff(Psn::new(last));
                if d as usize >= WINDOW {
                    self.seen.iter_mut().for_each(|w| *w = 0);
                } else {
                    for k in 1..=d as u32 {
                        let i = Psn::new(last).add(k).value() as usize % WINDOW;
                        self.seen[i / 64] &= !(1 << (i % 64));
                    }
                }
            }
        }
        self.counters.psn_last = Some(p.value());
    }

    fn slot(&self, p: Psn) -> Option<Slot> {
        let s = self.sent[p.value() as usize % SENT];
        (s.psn == p.value() | SLOT_USED).then_some(s)
    }

    /// A request of this flow: first as the capture shows it (sequence, gaps, resends),
    /// then as the responder takes it (accepted or not, and the messages it completes).
    fn on_request(
        &mut self,
        number: u64,
        ts: u64,
        op: Kind,
        psn: Psn,
        payload: u64,
        dma_len: Option<u32>,
    ) {
        self.counters.requests += 1;
        self.sequence(number, ts, psn);
        let slack = read_slack(op, dma_len);
        if slack > 0 {
            self.read_slack = slack;
        }
        if !self.accepts(psn) {
            return;
        }
        self.epsn = Some(psn.add(1));
        self.epsn_slack = slack;
        self.reassemble(op, payload, dma_len);
    }

    /// What the capture shows: gaps, late packets, resends; and the send-time slot
    /// the response latency is measured from.
    fn sequence(&mut self, number: u64, ts: u64, psn: Psn) {
        let retransmit = match self.next_psn {
            None => {
                self.counters.psn_first = Some(psn.value());
                self.advance(psn);
                false
            }
            Some(expected) => {
                let d = psn.diff(expected);
                if d >= 0 {
                    // Ahead: a gap, unless a READ just consumed those PSNs.
                    if d as u32 > self.read_slack {
                        self.counters.gaps += 1;
                        self.counters.missing_psns += d as u64;
                        if self.gap_events.len() < MAX_EVENTS {
                            self.gap_events.push(GapEvent {
                                frame: number,
                                expected: expected.value(),
                                got: psn.value(),
                                missing: d as u32,
                            });
                        }
                    }
                    self.read_slack = 0;
                    self.advance(psn);
                    false
                } else if self.seen(psn) == Some(false) {
                    self.counters.out_of_order += 1;
                    false
                } else {
                    // Seen before, or too old to know: a resend.
                    true
                }
            }
        };
        if retransmit {
            self.counters.retransmissions += 1;
        }
        self.mark(psn);
        self.sent[psn.value() as usize % SENT] =
            Slot { psn: psn.value() | SLOT_USED, ts, frame: number };
        if psn.diff(Psn::new(self.counters.psn_last.unwrap_or(psn.value()))) >= 0 {
            self.next_psn = Some(psn.add(1));
        }
    }

    /// What the responder accepts. RC/RD/XRC accept only the expected PSN (go-back-N:
    /// later packets are NAK'd or dropped, earlier ones are duplicates); UC accepts a
    /// jump but abandons the message in progress; UD has no sequence.
    fn accepts(&mut self, psn: Psn) -> bool {
        match (self.transport, self.epsn) {
            (Transport::Ud, _) | (_, None) => true,
            (Transport::Uc, Some(e)) => {
                if psn.diff(e) > 0 && self.msg_open.take().is_some() {
                    self.counters.broken_messages += 1;
                }
                psn.diff(e) >= 0
            }
            (_, Some(e)) => {
                let d = psn.diff(e);
                d == 0 || (d > 0 && d as u32 <= self.epsn_slack)
            }
        }
    }

    /// Messages are reassembled from the responder's view: READ and atomic requests
    /// are whole messages; SEND and WRITE run First…Last (or Only).
    fn reassemble(&mut self, op: Kind, payload: u64, dma_len: Option<u32>) {
        if op.contains(Kind::READ) {
            let len = dma_len.unwrap_or(0) as u64;
            self.counters.reads.messages += 1;
            self.counters.reads.bytes += len;
            self.counters.largest_message = self.counters.largest_message.max(len);
            return;
        }
        if op.contains(Kind::ATOMIC) || op.contains(Kind::ATOMIC_WRITE) {
            self.counters.atomics.messages += 1;
            self.counters.atomics.bytes += 8;
            return;
        }
        let class = if op.contains(Kind::SEND) {
            Kind::SEND
        } else if op.contains(Kind::WRITE) {
            Kind::WRITE
        } else {
            return;
        };
        let first = op.contains(Kind::FIRST);
        let last = op.contains(Kind::LAST);
        let total = match (self.msg_open.take(), first) {
            (Some(_), true) => {
                self.counters.broken_messages += 1;
                Some(payload)
            }
            (Some((k, n)), false) if k == class => Some(n + payload),
            (_, false) => {
                self.counters.broken_messages += 1;
                None
            }
            (None, true) => Some(payload),
        };
        if let Some(n) = total {
            if last {
                let c = if class == Kind::SEND {
                    &mut self.counters.sends
                } else {
                    &mut self.counters.writes
                };
                c.messages += 1;
                c.bytes += n;
                self.counters.largest_message = self.counters.largest_message.max(n);
            } else {
                self.msg_open = Some((class, n));
            }
        }
    }

    /// A response (ACK, NAK, READ response, ATOMIC ACK) to this flow's requests.
    fn on_response(
        &mut self,
        number: u64,
        ts: u64,
        op: Kind,
        psn: Psn,
        syndrome: Option<crate::wire::Syndrome>,
    ) {
        if op.contains(Kind::READ) {
            if op.contains(Kind::FIRST) {
                if let Some(s) = self.slot(psn) {
                    self.read_latency.record(ts.saturating_sub(s.ts));
                }
            }
            if !op.contains(Kind::LAST) {
                return;
            }
        }
        let Some(syn) = syndrome else { return };
        match syn.kind() {
            AckKind::Ack { .. } => {
                self.counters.acks += 1;
                // Past what was sent, and past what a READ's responses use.
                if let Some(next) = self.next_psn {
                    let d = psn.diff(next);
                    if d >= 0 && d as u32 >= self.read_slack && self.ghost_acks.len() < MAX_EVENTS {
                        self.ghost_acks.push(GhostAck {
                            frame: number,
                            psn: psn.value(),
                            next_psn: next.value(),
                        });
                    }
                }
                if let Some(prev) = self.last_acked {
                    let d = psn.diff(prev);
                    if d < 0 {
                        self.counters.ack_regressions += 1;
                    } else if d > 1 {
                        self.counters.coalesced_acks += 1;
                    }
                    self.counters.acked_packets += d.max(0) as u64;
                } else {
                    self.counters.acked_packets += 1;
                }
                if self.last_acked.is_none_or(|p| psn.diff(p) > 0) {
                    self.last_acked = Some(psn);
                }
                if !op.contains(Kind::READ) {
                    if let Some(s) = self.slot(psn) {
                        self.ack_latency.record(ts.saturating_sub(s.ts));
                    }
                }
            }
            kind @ (AckKind::Nak(_) | AckKind::RnrNak { .. } | AckKind::Reserved) => {
                let wc_status = match kind {
                    AckKind::Nak(n) => {
                        self.counters.naks += 1;
                        n.wc_status()
                    }
                    AckKind::RnrNak { .. } => {
                        self.counters.rnr_naks += 1;
                        None
                    }
                    _ => None,
                };
                // A PSN sequence error NAK acknowledges everything before its PSN.
                if matches!(kind, AckKind::Nak(NakCode::PsnSequenceError)) {
                    let before = psn.add(0xFF_FFFF);
                    if self.last_acked.is_none_or(|p| before.diff(p) > 0) {
                        self.last_acked = Some(before);
                    }
                }
                if self.nak_events.len() < MAX_EVENTS {
                    self.nak_events.push(NakEvent {
                        frame: number,
                        psn: psn.value(),
                        syndrome: syn.to_string(),
                        syndrome_value: syn.0,
                        request_frame: self.slot(psn).map(|s| s.frame),
                        wc_status,
                    });
                }
            }
        }
    }
}

/// CM state: connections announced by REQ/REP, by communication ID.
#[derive(Debug, Clone, Default)]
struct Cm {
    /// REQ by its local communication ID: (active side address, its QPN, starting PSN, frame).
    /// The REQ's starting PSN is the one the active side expects to receive, so the
    /// passive side's requests start there; the REP's is where the active side's start
    /// (Linux `ib_send_cm_req` sets the active QP's `rq_psn` from it; lab captures agree).
    reqs: FxMap<u32, (IpAddr, u32, Psn, u64)>,
    /// Established pairs: (addr, qpn) of each side.
    pairs: Vec<((IpAddr, u32), (IpAddr, u32))>,
    /// What CM announced for the requests sent *to* (addr, qpn): the sender's
    /// starting PSN and the frames of the REQ and REP.
    announced: FxMap<(IpAddr, u32), CmInfo>,
}

/// A connection as the CM exchange announced it, seen from one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CmInfo {
    /// The communication ID of the active side.
    pub comm_id: u32,
    /// The QPN that sends this flow's requests.
    pub sender_qpn: u32,
    /// The starting PSN announced for this flow's requests.
    pub start_psn: u32,
    /// Which CM message announced it: "REQ" (requests from the passive side) or "REP".
    pub announced_in: &'static str,
    pub req_frame: u64,
    pub rep_frame: u64,
}

/// Whole-capture counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub frames: u64,
    pub roce_frames: u64,
    pub other_frames: u64,
    pub undecodable_frames: u64,
    pub cnps: u64,
    pub cm_messages: u64,
}

/// Slots of the direct-mapped flow cache in front of the hash map (a power of two).
const CACHE: usize = 64;

/// Feeds frames, then reports.
#[derive(Debug)]
pub struct Analyzer {
    flows: Vec<Flow>,
    index: FxMap<FlowKey, usize>,
    cm: Cm,
    totals: Totals,
    /// Recently used flows by a cheap slot function: most packets skip the map.
    cache: Box<[Option<(FlowKey, usize)>; CACHE]>,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer {
            flows: Vec::new(),
            index: FxMap::default(),
            cm: Cm::default(),
            totals: Totals::default(),
            cache: Box::new([None; CACHE]),
        }
    }
}

impl Analyzer {
    pub fn new() -> Analyzer {
        Analyzer::default()
    }

    fn flow(&mut self, key: FlowKey, t: Transport, number: u64, ts: u64) -> usize {
        let low = |a: IpAddr| match a {
            IpAddr::V4(v) => u32::from(v),
            IpAddr::V6(v) => u128::from(v) as u32,
        };
        let slot = (key.dest_qp
            ^ key.src_qp.rotate_left(7)
            ^ low(key.src).wrapping_mul(0x9E37_79B9)) as usize
            % CACHE;
        if let Some((k, i)) = self.cache[slot] {
            if k == key {
                return i;
            }
        }
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                self.flows.push(Flow::new(key, t, number, ts));
                self.index.insert(key, self.flows.len() - 1);
                self.flows.len() - 1
            }
        };
        self.cache[slot] = Some((key, i));
        i
    }

    /// Adds one decoded frame (`data` are its captured bytes, `orig_len` its length
    /// on the wire).
    pub fn add(&mut self, number: u64, ts: u64, orig_len: u32, frame: &Frame, data: &[u8]) {
        match Facts::of(frame, data) {
            Some(p) => self.add_facts(number, ts, orig_len, &p),
            None => self.add_other(frame.stop.is_some() && frame.roce.is_some()),
        }
    }

    /// Counts a frame that holds no BTH (`undecodable`: RoCE whose decoding stopped).
    fn add_other(&mut self, undecodable: bool) {
        self.totals.frames += 1;
        if undecodable {
            self.totals.undecodable_frames += 1;
        } else {
            self.totals.other_frames += 1;
        }
    }

    /// Adds what was [`Seen`] of one captured frame; frames must come in capture
    /// order, as with [`Analyzer::add`].
    #[inline]
    pub fn add_seen(&mut self, number: u64, ts: u64, orig_len: u32, seen: &Seen) {
        match seen {
            Seen::Roce(p, None) => self.add_facts(number, ts, orig_len, p),
            Seen::Roce(p, Some(m)) => {
                self.add_facts(number, ts, orig_len, &Facts { mad: Some(m), ..*p })
            }
            Seen::Other { undecodable } => self.add_other(*undecodable),
            Seen::Skipped => {}
        }
    }

    /// Adds one captured frame by its bytes: the common layout through the fast
    /// path ([`Facts::parse`]), anything else decoded in full into `scratch` (a
    /// reused [`Frame`]) and added with [`Analyzer::add`].
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn add_captured(
        &mut self,
        number: u64,
        ts: u64,
        orig_len: u32,
        link: LinkType,
        data: &[u8],
        opts: &frame::Options,
        scratch: &mut Frame,
    ) {
        match Facts::parse(link, data, opts) {
            Some(p) => self.add_facts(number, ts, orig_len, &p),
            None => {
                frame::decode_into(scratch, link, data, opts);
                self.add(number, ts, orig_len, scratch, data);
            }
        }
    }

    /// Adds one RoCE packet by its facts: from [`Facts::parse`] (the fast path) or
    /// [`Facts::of`] a decoded frame.
    #[inline]
    pub fn add_facts(&mut self, number: u64, ts: u64, orig_len: u32, p: &Facts) {
        self.totals.frames += 1;
        self.totals.roce_frames += 1;
        let t = p.info.map_or(p.opcode.transport(), |i| i.transport);
        let src_qp = match (t, p.src_qp) {
            (Transport::Ud, Some(q)) => q,
            _ => u32::MAX,
        };
        let key = FlowKey { src: p.src, dst: p.dst, dest_qp: p.dest_qp, src_qp };
        let i = self.flow(key, t, number, ts);
        {
            let f = &mut self.flows[i];
            f.counters.packets += 1;
            f.counters.bytes += orig_len as u64;
            f.counters.payload_bytes += p.payload_len;
            f.last_ts = ts;
            f.opcodes[p.opcode.0 as usize] += 1;
            f.counters.ecn_ce += (p.ecn == 3) as u64;
            f.counters.fecn += p.fecn as u64;
            f.counters.becn += p.becn as u64;
            match p.icrc {
                Some(c) => {
                    f.counters.icrc_checked += 1;
                    f.counters.icrc_bad += !c.ok() as u64;
                }
                None => f.snapped += 1,
            }
        }
        if t == Transport::Cnp {
            self.totals.cnps += 1;
            self.flows[i].counters.cnps += 1;
            return;
        }
        if let Some(m) = p.mad {
            self.totals.cm_messages += m.cm.is_some() as u64;
            self.observe_cm(number, p.src, m);
            return;
        }
        let Some(info) = p.info else { return };
        // A frame cut inside its extension headers still has a BTH: its PSN counts;
        // what the missing headers would have said (AETH, RETH) is simply absent.
        if p.ack_req {
            self.flows[i].counters.ack_req += 1;
        }
        if info.is_request() {
            self.flows[i].on_request(number, ts, info.kind, p.psn, p.payload_len, p.dma_len);
        } else if info.is_response() {
            if let Some(r) = self.requester_of(i, p.psn) {
                self.flows[r].on_response(number, ts, info.kind, p.psn, p.syndrome);
            }
        }
    }

    fn observe_cm(&mut self, number: u64, src: IpAddr, m: &crate::frame::Mad) {
        use mad::CmMessage;
        match m.cm {
            Some(CmMessage::Req(r)) => {
                self.cm.reqs.insert(r.local_comm_id, (src, r.local_qpn, r.starting_psn, number));
            }
            Some(CmMessage::Rep(r)) => {
                if let Some(&(a, a_qpn, a_psn, req_frame)) = self.cm.reqs.get(&r.remote_comm_id) {
                    let b = (src, r.local_qpn);
                    self.cm.pairs.push(((a, a_qpn), b));
                    let info = |sender_qpn, start_psn: Psn, announced_in| CmInfo {
                        comm_id: r.remote_comm_id,
                        sender_qpn,
                        start_psn: start_psn.value(),
                        announced_in,
                        req_frame,
                        rep_frame: number,
                    };
                    // Requests to B's QP come from A's, starting at the REP's PSN;
                    // requests to A's QP come from B's, starting at the REQ's PSN.
                    self.cm.announced.insert(b, info(a_qpn, r.starting_psn, "REP"));
                    self.cm.announced.insert((a, a_qpn), info(r.local_qpn, a_psn, "REQ"));
                }
            }
            _ => {}
        }
    }

    /// The flow whose requests a response in flow `i` answers (the reverse flow).
    fn requester_of(&mut self, i: usize, psn: Psn) -> Option<usize> {
        if let Some(p) = self.flows[i].paired {
            return Some(p);
        }
        let k = self.flows[i].key;
        // The responder at k.src answers requests sent by k.dst's QP k.dest_qp.
        // CM first: which QP at k.src is connected to (k.dst, k.dest_qp)?
        let by_cm = self.cm.pairs.iter().find_map(|&(x, y)| {
            if x == (k.dst, k.dest_qp) && y.0 == k.src {
                Some(y.1)
            } else if y == (k.dst, k.dest_qp) && x.0 == k.src {
                Some(x.1)
            } else {
                None
            }
        });
        let candidates: Vec<usize> = self
            .flows
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f.key.src == k.dst
                    && f.key.dst == k.src
                    && f.key.src_qp == u32::MAX
                    && by_cm.is_none_or(|q| f.key.dest_qp == q)
            })
            .map(|(j, _)| j)
            .collect();
        let chosen = match (by_cm, candidates.as_slice()) {
            (Some(_), [j]) => Some((*j, "CM")),
            (None, [j]) => Some((*j, "address")),
            (_, many) => many
                .iter()
                .copied()
                .filter(|&j| self.flows[j].seen(psn) == Some(true))
                .max_by_key(|&j| self.flows[j].last_ts)
                .map(|j| (j, "PSN")),
        };
        let (j, how) = chosen?;
        self.flows[i].paired = Some(j);
        self.flows[i].paired_by = Some(how);
        if self.flows[j].paired.is_none() {
            self.flows[j].paired = Some(i);
            self.flows[j].paired_by = Some(how);
        }
        Some(j)
    }

    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    pub fn flows(&self) -> &[Flow] {
        &self.flows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_median_within_precision() {
        let mut h = Histogram::default();
        for v in [5_000u64, 6_000, 7_000, 1_000_000, 12] {
            h.record(v);
        }
        assert_eq!((h.min, h.max, h.count), (12, 1_000_000, 5));
        let m = h.median().unwrap();
        assert!((6_000 - 6_000 / 64..=6_000 + 6_000 / 64).contains(&m), "{m}");
        for v in [0u64, 1, 127, 128, 129, 1 << 20, u64::MAX / 3] {
            let (lo, w) = Histogram::bounds(Histogram::index(v));
            assert!(lo <= v && v < lo + w, "{v}: {lo}+{w}");
        }
    }
}
