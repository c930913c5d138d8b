//! One scenario's wire, decoded once: every RoCE frame with what the judge, the
//! profile observer and every renderer need of it — addresses, BTH, the AETH's
//! meaning, ICRC verdict, ECN, and what the lab switch did to it (its marks, read
//! back with the lab's own parser). None of them opens the capture again.
//!
//! Owns: [`Timeline`], [`Packet`] and [`read`], the one place the judge opens a
//! capture (and [`read_with_flows`], for a capture no scenario drew). Imports: dissector's capture, frame, ctx, print, wire and flow packet
//! shapes, the lab's marks (`lab::mark`).
use std::net::IpAddr;
use std::path::Path;

use dissector::filter::Filter;
use dissector::flow::Analyzer;
use dissector::frame::{self, Frame, Options};
use dissector::wire::{AckClass, AckKind, Opcode, Psn, Transport};
use lab::mark::Marks;

use crate::scenario::pattern::MAX_CONDITIONS;

/// RoCE frames whose decoded line is kept (the HTML ladder draws this many).
pub(crate) const MAX_ROWS: usize = 2000;
/// Decoded lines kept of the whole capture, RoCE or not, for a failing scenario's
/// report.
pub(crate) const MAX_LINES: usize = 40;

/// One RoCE frame.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Packet {
    pub number: u64,
    pub ts_ns: u64,
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    pub dest_qp: u32,
    pub psn: Psn,
    pub opcode: Opcode,
    /// The operation's name without the transport (`RDMA WRITE Only`); empty for
    /// opcodes the table does not know.
    pub op: &'static str,
    pub is_request: bool,
    /// The AETH's meaning, when it has one.
    pub ack: Option<AckKind>,
    /// `None` when the ICRC could not be checked (cut short).
    pub icrc_ok: Option<bool>,
    /// ECN Congestion Experienced.
    pub ce: bool,
    pub cnp: bool,
    /// A MAD on QP1 (CM): how the ladder labels it.
    pub mad: Option<String>,
    /// A datagram's Q_Key (its DETH).
    pub q_key: Option<u32>,
    /// A datagram's source QP (its DETH).
    pub src_qp: Option<u32>,
    /// What the lab switch did to it.
    pub marks: Marks,
    /// Which of the timeline's [`conditions`](Timeline::conditions) the frame
    /// passes: bit `i` for the `i`-th.
    pub held: u64,
    /// The frame as `roce decode` prints it, with its comment (the first
    /// [`MAX_ROWS`] RoCE frames).
    pub line: Option<String>,
    /// The rest of its headers, as a wire snapshot writes them.
    pub hdr: Headers,
}

/// The header fields of a RoCE frame that only the wire snapshot reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Headers {
    pub solicited: bool,
    pub mig_req: bool,
    pub ack_req: bool,
    pub pad: u8,
    /// Payload bytes on the wire (`None`: cut short before it).
    pub len: Option<usize>,
    pub msn: Option<u32>,
    /// RETH: VA, R_Key, DMA length.
    pub reth: Option<(u64, u32, u32)>,
    /// AtomicETH: VA and R_Key.
    pub atomic: Option<(u64, u32)>,
    /// An ImmDt is carried; an IETH's R_Key to invalidate.
    pub immediate: bool,
    pub invalidate: Option<u32>,
    /// IP DSCP and ECN, and the UDP source port (RoCEv2).
    pub dscp: Option<u8>,
    pub ecn: Option<u8>,
    pub udp_src: Option<u16>,
}

impl Packet {
    pub(crate) fn ack_class(&self) -> Option<AckClass> {
        self.ack.and_then(AckKind::class)
    }

    /// How expectations and reports name it: an Acknowledge by its AETH (`ACK`,
    /// `RNR NAK`, `NAK Remote Access Error`), every other frame by its operation.
    pub(crate) fn response_name(&self) -> String {
        match self.ack_class() {
            Some(c) if self.op == "Acknowledge" => c.to_string(),
            _ if self.op.is_empty() => self.opcode.to_string(),
            _ => self.op.to_string(),
        }
    }

    /// It reached its receiver: not dropped on the way, its ICRC not bad.
    pub(crate) fn delivered(&self) -> bool {
        !self.marks.dropped() && self.icrc_ok != Some(false)
    }

    /// As pace analysis takes it.
    pub(crate) fn pace(&self) -> dissector::flow::pace::Packet {
        dissector::flow::pace::Packet {
            number: self.number,
            ts_ns: self.ts_ns,
            psn: self.psn,
            kind: self.opcode.info().map(|i| i.kind).unwrap_or_default(),
            ack: self.ack,
            delivered: self.delivered(),
        }
    }

    /// As go-back-N analysis takes it.
    pub(crate) fn recovery(&self) -> dissector::flow::recovery::Packet {
        dissector::flow::recovery::Packet {
            number: self.number,
            ts_ns: self.ts_ns,
            psn: self.psn,
            delivered: self.delivered(),
            // How long the switch held it: as its mark says, or (a capture from
            // before the switch said) at least what its rules asked for.
            held_ns: if self.marks.held() {
                self.marks.arrived_ns_before().unwrap_or_else(|| self.marks.least_held_ns())
            } else {
                0
            },
            ack: self.ack,
        }
    }
}

/// A capture, decoded.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timeline {
    pub packets: Vec<Packet>,
    /// Of the capture's first frame (RoCE or not): times are shown from there, as
    /// `roce decode` shows them.
    pub first_ts_ns: Option<u64>,
    /// The first [`MAX_LINES`] frames as `roce decode` prints them; `…` when there
    /// are more.
    pub lines: Vec<String>,
    /// Why reading stopped early (a damaged file): the frames before are kept.
    pub damaged: Option<String>,
    /// The header conditions (display filters) the expectations put on frames,
    /// each evaluated on every RoCE frame while it was decoded; at most
    /// [`MAX_CONDITIONS`].
    pub conditions: Vec<String>,
}

impl Timeline {
    /// Whether a frame whose [`Packet::held`] is `held` passes the condition
    /// `text`; a condition the timeline was not read with holds nowhere.
    pub(crate) fn holds(conditions: &[String], held: u64, text: &str) -> bool {
        conditions.iter().position(|c| c == text).is_some_and(|i| held >> i & 1 == 1)
    }
}

/// `ConnectRequest (REQ)` → `REQ`.
fn cm_short(name: &str) -> &str {
    name.rsplit_once('(').and_then(|(_, r)| r.strip_suffix(')')).unwrap_or(name)
}

fn mad_label(f: &Frame) -> Option<String> {
    let m = f.mad.as_ref()?;
    Some(match (m.cm, m.header.mgmt_class, m.header.attribute_id) {
        (Some(cm), _, _) => format!("CM {}", cm_short(cm.name())),
        (None, 0x07, 0x0017) => "CM SIDR REQ".to_string(),
        (None, 0x07, 0x0018) => "CM SIDR REP".to_string(),
        (None, 0x07, a) => format!("CM attr {a:#06x}"),
        (None, c, a) => format!("MAD class {c:#04x} attr {a:#06x}"),
    })
}

/// Reads a capture into its timeline. A file that cannot be opened is an error; a
/// damaged one keeps the frames before the damage and says so.
pub(crate) fn read(path: &Path) -> Result<Timeline, String> {
    read_with(path, &[])
}

/// [`read`], each RoCE frame also tested against `conditions` (display filters;
/// at most [`MAX_CONDITIONS`]).
pub(crate) fn read_with(path: &Path, conditions: &[String]) -> Result<Timeline, String> {
    read_into(path, conditions, None)
}

/// [`read`], and the capture's flows with their pairs as the analyzer finds
/// them (from CM, else from the PSNs), for what knows no scenario's QPs.
pub(crate) fn read_with_flows(path: &Path) -> Result<(Timeline, Analyzer), String> {
    let mut flows = Analyzer::new();
    let t = read_into(path, &[], Some(&mut flows))?;
    Ok((t, flows))
}

fn read_into(
    path: &Path,
    conditions: &[String],
    mut flows: Option<&mut Analyzer>,
) -> Result<Timeline, String> {
    if conditions.len() > MAX_CONDITIONS {
        return Err(format!(
            "{} header conditions; a scenario may use at most {MAX_CONDITIONS}",
            conditions.len()
        ));
    }
    let filters = conditions
        .iter()
        .map(|c| Filter::compile(c).map_err(|e| format!("condition `{c}`: {}", e.kind)))
        .collect::<Result<Vec<Filter>, String>>()?;
    let mut r = dissector::capture::open(path).map_err(|e| e.to_string())?;
    let opts = Options::default();
    let mut t = Timeline { conditions: conditions.to_vec(), ..Timeline::default() };
    let mut prev_ts = None;
    let mut fr = frame::decode(dissector::LinkType::ETHERNET, &[], &opts);
    loop {
        let rec = match r.next_packet() {
            Ok(Some(rec)) => rec,
            Ok(None) => break,
            Err(e) => {
                t.damaged = Some(e.to_string());
                break;
            }
        };
        let first = *t.first_ts_ns.get_or_insert(rec.ts_ns);
        let prev = prev_ts.replace(rec.ts_ns).unwrap_or(rec.ts_ns);
        frame::decode_into(&mut fr, rec.link, rec.data, &opts);
        let line = |prev| {
            let ctx = dissector::ctx::Ctx::of(&rec, &fr, first, prev);
            let mut s = String::new();
            dissector::print::line(&ctx, &mut s);
            s
        };
        if t.lines.len() < MAX_LINES {
            t.lines.push(line(first));
        } else if t.lines.len() == MAX_LINES {
            t.lines.push("…".into());
        }
        if let Some(a) = flows.as_deref_mut() {
            a.add(rec.number, rec.ts_ns, rec.orig_len, &fr, rec.data);
        }
        let Some(ib) = &fr.ib else { continue };
        let info = ib.info;
        let (src, dst) = fr.addrs().unzip();
        let keep_line = t.packets.len() < MAX_ROWS;
        let held = if filters.is_empty() {
            0
        } else {
            let ctx = dissector::ctx::Ctx::of(&rec, &fr, first, prev);
            filters.iter().enumerate().fold(0u64, |m, (i, f)| m | u64::from(f.matches(&ctx)) << i)
        };
        t.packets.push(Packet {
            number: rec.number,
            ts_ns: rec.ts_ns,
            src,
            dst,
            dest_qp: ib.bth.dest_qp,
            psn: ib.bth.psn,
            opcode: ib.bth.opcode,
            op: info.map_or("", |i| i.name),
            is_request: info.is_some_and(|i| i.is_request()),
            ack: ib.aeth.map(|a| a.syndrome.kind()),
            icrc_ok: fr.icrc_check(rec.data).map(|c| c.ok()),
            ce: fr.ecn() == Some(3),
            cnp: info.is_some_and(|i| i.transport == Transport::Cnp),
            mad: mad_label(&fr),
            q_key: ib.deth.map(|d| d.q_key),
            src_qp: ib.deth.map(|d| d.src_qp),
            marks: rec.comment.map(Marks::parse).unwrap_or_default(),
            held,
            line: keep_line.then(|| line(prev).trim().to_string()),
            hdr: Headers {
                solicited: ib.bth.solicited_event,
                mig_req: ib.bth.mig_req,
                ack_req: ib.bth.ack_req,
                pad: ib.bth.pad_count,
                len: fr.payload_len_on_wire(),
                msn: ib.aeth.map(|a| a.msn),
                reth: ib.reth.map(|r| (r.va, r.r_key, r.dma_len)),
                atomic: ib.atomiceth.map(|a| (a.va, a.r_key)),
                immediate: ib.immdt.is_some(),
                invalidate: ib.ieth,
                dscp: fr.dscp(),
                ecn: fr.ecn(),
                udp_src: fr.udp.map(|u| u.src_port),
            },
        });
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../captures/lab").join(name)
    }

    /// A real lab capture with a dropped frame: the switch's mark read back as a
    /// drop, the frame itself still there (it was sent), names from the vocabulary.
    #[test]
    fn a_lab_capture_reads_with_its_marks() {
        let t = read(&capture("rc_drop_retransmit.pcapng")).unwrap();
        let p12 = t.packets.iter().find(|p| p.number == 12).unwrap();
        assert!(p12.marks.dropped() && !p12.delivered());
        assert_eq!((p12.op, p12.psn.value(), p12.is_request), ("SEND First", 8227874, true));
        assert!(p12.line.as_deref().is_some_and(|l| l.contains("not delivered")), "{:?}", p12.line);
        let nak = t.packets.iter().find(|p| p.number == 16).unwrap();
        assert_eq!(nak.response_name(), "NAK PSN Sequence Error");
        assert_eq!(t.packets.iter().find(|p| p.number == 21).unwrap().response_name(), "ACK");
        assert!(t.packets.iter().filter(|p| p.number != 12).all(|p| !p.marks.dropped()));
        assert!(t.lines.len() <= MAX_LINES + 1 && !t.lines.is_empty());
        let cm = read(&capture("write_bw_rdma_cm.pcapng")).unwrap();
        assert!(cm.packets.iter().any(|p| p.mad.as_deref() == Some("CM REQ")));
        assert!(read(Path::new("/nonexistent/x.pcapng")).is_err());
    }

    /// Conditions are evaluated on the real frame: the dropped SEND First's PSN,
    /// and an AckReq bit, each held by exactly the frames that carry it.
    #[test]
    fn conditions_are_display_filters_held_per_frame() {
        let c = ["infiniband.bth.psn == 8227874".to_string(), "infiniband.bth.a == 1".to_string()];
        let t = read_with(&capture("rc_drop_retransmit.pcapng"), &c).unwrap();
        let psn: Vec<u64> = t
            .packets
            .iter()
            .filter(|p| Timeline::holds(&t.conditions, p.held, &c[0]))
            .map(|p| p.number)
            .collect();
        let want: Vec<u64> =
            t.packets.iter().filter(|p| p.psn.value() == 8227874).map(|p| p.number).collect();
        assert!(psn.contains(&12) && psn == want, "{psn:?} {want:?}");
        assert!(t.packets.iter().any(|p| Timeline::holds(&t.conditions, p.held, &c[1])));
        assert!(t.packets.iter().any(|p| !Timeline::holds(&t.conditions, p.held, &c[1])));
        assert!(!Timeline::holds(&t.conditions, u64::MAX, "not read with this"));
        let many: Vec<String> = (0..65).map(|i| format!("infiniband.bth.psn == {i}")).collect();
        assert!(read_with(&capture("rc_drop_retransmit.pcapng"), &many).is_err());
    }
}
