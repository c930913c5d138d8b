//! The flow report: what [`Analyzer::report`] returns once every frame is in — whole
//! capture totals and one [`FlowReport`] per flow, in order of first appearance — as
//! the JSON of `roce flows --json` (its `Serialize` shape is stable) and as the text of
//! `roce flows` (its `Display`: a table, then each flow's notable events).
//!
//! Owns: the report's shape and wording. Imports: the flow analysis it summarises
//! (its parent, [`crate::flow`]); nothing below that.

use core::fmt;

use serde::Serialize;

use super::{
    Analyzer, CmInfo, Flow, FlowCounters, GapEvent, GhostAck, LatencySummary, NakEvent, Totals,
};

impl Analyzer {
    /// The report: flows in order of first appearance.
    pub fn report(&self) -> Report {
        Report {
            totals: self.totals.clone(),
            flows: self
                .flows
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let mut r = FlowReport::new(i, f);
                    r.cm = self.cm.announced.get(&(f.key.dst, f.key.dest_qp)).copied();
                    r
                })
                .collect(),
        }
    }
}

/// The JSON shape of `roce flows --json` (stable).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub totals: Totals,
    pub flows: Vec<FlowReport>,
}

/// One flow in the report. Its JSON keys: the flow's identity, then its
/// [`FlowCounters`] (flattened: one key per counter, in their order), then what is
/// summarised or listed (opcodes, latencies, events).
#[derive(Debug, Clone, Serialize)]
pub struct FlowReport {
    pub id: usize,
    pub transport: &'static str,
    pub src: String,
    pub dst: String,
    pub dest_qp: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src_qp: Option<u32>,
    /// The flow id of the reverse direction, and how the pair was found (CM, address, PSN).
    pub paired_with: Option<usize>,
    pub paired_by: Option<&'static str>,
    /// What the CM exchange announced for this flow's requests, if it was captured.
    pub cm: Option<CmInfo>,
    pub first_frame: u64,
    pub duration_ns: u64,
    /// The flow's counters, as [`Flow`] has them.
    #[serde(flatten)]
    pub counters: FlowCounters,
    pub opcodes: Vec<(String, u32)>,
    pub ack_latency: Option<LatencySummary>,
    pub read_latency: Option<LatencySummary>,
    pub nak_events: Vec<NakEvent>,
    pub gap_events: Vec<GapEvent>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ghost_acks: Vec<GhostAck>,
}

impl FlowReport {
    fn new(id: usize, f: &Flow) -> FlowReport {
        FlowReport {
            id: id + 1,
            transport: f.transport.abbrev(),
            src: f.key.src.to_string(),
            dst: f.key.dst.to_string(),
            dest_qp: f.key.dest_qp,
            src_qp: (f.key.src_qp != u32::MAX).then_some(f.key.src_qp),
            paired_with: f.paired.map(|p| p + 1),
            paired_by: f.paired_by,
            cm: None,
            first_frame: f.first_frame,
            duration_ns: f.last_ts.saturating_sub(f.first_ts),
            counters: f.counters,
            opcodes: f.opcode_counts().map(|(o, n)| (f.opcode_name(o), n)).collect(),
            ack_latency: f.ack_latency.summary(),
            read_latency: f.read_latency.summary(),
            nak_events: f.nak_events.clone(),
            gap_events: f.gap_events.clone(),
            ghost_acks: f.ghost_acks.clone(),
        }
    }

    pub fn messages(&self) -> u64 {
        let c = &self.counters;
        c.sends.messages + c.writes.messages + c.reads.messages + c.atomics.messages
    }
}

/// A duration in the unit a reader takes in at a glance: `12.3 µs`, `4.56 ms`.
fn us(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} µs", ns as f64 / 1e3)
    }
}

impl fmt::Display for Report {
    /// The text table of `roce flows`, then the notable events of each flow.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.totals;
        writeln!(
            f,
            "{} frames: {} RoCE, {} other, {} RoCE frames undecodable; {} flows; {} CNPs; {} CM messages",
            t.frames, t.roce_frames, t.other_frames, t.undecodable_frames, self.flows.len(), t.cnps, t.cm_messages
        )?;
        if self.flows.is_empty() {
            if t.roce_frames == 0 {
                writeln!(f, "no RoCE traffic in this capture (UDP port 4791 or ethertype 0x8915). If both QPs were on one rxe device, their traffic was looped back inside the driver and never reached the wire.")?;
            }
            return Ok(());
        }
        self.table(f)?;
        for r in &self.flows {
            writeln!(f, "flow {}:", r.id)?;
            for l in r.notes() {
                writeln!(f, "    {l}")?;
            }
        }
        Ok(())
    }
}

impl Report {
    /// One row per flow: its endpoints, pair, counts and PSN range.
    fn table(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>3} {:<4} {:<40} {:>5} {:>7} {:>9} {:>5} {:>17} {:>4} {:>4} {:>4} {:>5} {:>4} {:>4} {:>4} {:>4} {:>4}",
            "id", "tr", "flow (src → dst QP)", "pair", "packets", "bytes", "msgs", "PSN range", "gap", "ooo", "retx", "acks", "nak", "rnr", "ce", "cnp", "icrc"
        )?;
        for r in &self.flows {
            let c = &r.counters;
            let flow = match r.src_qp {
                Some(s) => format!("{}:{:#x} → {} {:#08x}", r.src, s, r.dst, r.dest_qp),
                None => format!("{} → {} {:#08x}", r.src, r.dst, r.dest_qp),
            };
            let psn = match (c.psn_first, c.psn_last) {
                (Some(a), Some(b)) => format!("{a}..{b}"),
                _ => "-".into(),
            };
            writeln!(
                f,
                "{:>3} {:<4} {:<40} {:>5} {:>7} {:>9} {:>5} {:>17} {:>4} {:>4} {:>4} {:>5} {:>4} {:>4} {:>4} {:>4} {:>4}",
                r.id,
                r.transport,
                flow,
                r.paired_with.map_or("-".into(), |p| p.to_string()),
                c.packets,
                c.bytes,
                r.messages(),
                psn,
                c.gaps,
                c.out_of_order,
                c.retransmissions,
                c.acks,
                c.naks,
                c.rnr_naks,
                c.ecn_ce,
                c.cnps,
                c.icrc_bad
            )?;
        }
        Ok(())
    }
}

impl FlowReport {
    /// The lines under `flow N:` in `roce flows`: what was carried, what went
    /// wrong (event by event), then latency, congestion and ICRC health.
    fn notes(&self) -> Vec<String> {
        let mut lines = Vec::new();
        self.traffic_notes(&mut lines);
        self.event_notes(&mut lines);
        self.health_notes(&mut lines);
        lines
    }

    /// Messages by kind, the CM connection, opcodes, and how the pair answered.
    fn traffic_notes(&self, lines: &mut Vec<String>) {
        let (r, c) = (self, &self.counters);
        let kinds: Vec<String> =
            [("SEND", c.sends), ("WRITE", c.writes), ("READ", c.reads), ("ATOMIC", c.atomics)]
                .iter()
                .filter(|(_, c)| c.messages > 0)
                .map(|(n, c)| format!("{n} {} ({} B)", c.messages, c.bytes))
                .collect();
        if !kinds.is_empty() {
            lines.push(format!("messages: {}; largest {} B", kinds.join(", "), c.largest_message));
        }
        if c.broken_messages > 0 {
            lines.push(format!(
                "{} broken messages (Middle/Last without First, or First while a message was open)",
                c.broken_messages
            ));
        }
        if let Some(cm) = r.cm {
            let check = match c.psn_first {
                Some(p) if p == cm.start_psn => "the first request uses it".to_string(),
                Some(p) => format!("but the first request used PSN {p}"),
                None => "no requests followed".to_string(),
            };
            lines.push(format!(
                "CM connection {:#010x} (REQ frame {}, REP frame {}): requests from QP {:#08x}, starting PSN {} announced in the {}; {check}",
                cm.comm_id, cm.req_frame, cm.rep_frame, cm.sender_qpn, cm.start_psn, cm.announced_in
            ));
        }
        let ops: Vec<String> = r.opcodes.iter().map(|(o, n)| format!("{o} ×{n}")).collect();
        lines.push(format!("opcodes: {}", ops.join(", ")));
        if let (Some(p), true) = (r.paired_with, c.requests > 0) {
            let acked = if c.acks > 0 {
                format!(
                    "; {:.2} request packets per ACK, {} coalesced ACKs",
                    c.acked_packets as f64 / c.acks as f64,
                    c.coalesced_acks
                )
            } else {
                String::new()
            };
            lines.push(format!(
                "answered in flow {p} (paired by {}): {} ACKs, {} NAKs, {} RNR NAKs{acked}",
                r.paired_by.unwrap_or("?"),
                c.acks,
                c.naks,
                c.rnr_naks
            ));
        }
    }

    /// ACK regressions, then each gap, NAK and ghost ACK with its frame.
    fn event_notes(&self, lines: &mut Vec<String>) {
        let (r, c) = (self, &self.counters);
        if c.ack_regressions > 0 {
            lines.push(format!(
                "{} ACKs moved the acknowledged PSN backwards (go-back-N violation)",
                c.ack_regressions
            ));
        }
        for g in &r.gap_events {
            lines.push(format!(
                "gap at frame {}: expected PSN {}, got {} ({} missing)",
                g.frame, g.expected, g.got, g.missing
            ));
        }
        for n in &r.nak_events {
            let req = n
                .request_frame
                .map_or("request not captured".into(), |fr| format!("request in frame {fr}"));
            let wc =
                n.wc_status.map_or(String::new(), |w| format!(" → requester completes with {w}"));
            lines.push(format!("frame {}: {} for PSN {} ({req}){wc}", n.frame, n.syndrome, n.psn));
        }
        for g in &r.ghost_acks {
            lines.push(format!(
                "frame {}: ACK for PSN {}, never sent (the next PSN to send was {}): a ghost ACK, which a requester must ignore — or the capture missed requests",
                g.frame, g.psn, g.next_psn
            ));
        }
    }

    /// ACK and READ latency, congestion marks, bad ICRCs.
    fn health_notes(&self, lines: &mut Vec<String>) {
        let (r, c) = (self, &self.counters);
        if let Some(l) = r.ack_latency {
            lines.push(format!(
                "ACK latency: min {} median {} max {} ({} samples)",
                us(l.min_ns),
                us(l.median_ns),
                us(l.max_ns),
                l.samples
            ));
        }
        if let Some(l) = r.read_latency {
            lines.push(format!(
                "READ response latency: min {} median {} max {} ({} samples)",
                us(l.min_ns),
                us(l.median_ns),
                us(l.max_ns),
                l.samples
            ));
        }
        if c.ecn_ce > 0 || c.cnps > 0 || c.fecn > 0 || c.becn > 0 {
            lines.push(format!(
                "congestion: {} ECN CE marks, {} CNPs, FECN {}, BECN {}",
                c.ecn_ce, c.cnps, c.fecn, c.becn
            ));
        }
        if c.icrc_bad > 0 {
            lines.push(format!("{} of {} ICRCs bad", c.icrc_bad, c.icrc_checked));
        }
    }
}
