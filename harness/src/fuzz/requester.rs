//! Requester batches: real verbs traffic from VM a (a WRITE, a READ, a
//! FetchAdd on one RC QP) while the switch drops, duplicates, delays, reorders
//! or corrupts b's responses, or answers a's requests in b's place with
//! responses of its own (`respond`: ACKs, NAKs, RNR NAKs, short READ responses,
//! ghost ACKs for PSNs never sent).
//!
//! What a requester must never do, whatever the responses: complete a READ or
//! an atomic successfully without the data it asked for in its buffer, or a
//! WRITE successfully that never landed; leave a WR without any completion;
//! write outside its MRs. The batch states the ops' success and their memory as
//! expectations; [`sightings`] reads the pairs (a success whose memory is wrong
//! is the finding, a failure with its memory unwritten is not).
//!
//! Owns: the requester batch, its fault menu, its oracle. Imports: the seeded
//! RNG, the results' verdicts, `super::gen`'s coverage cell types.
use std::fmt::Write as _;

use dissector::wire::Opcode;
use lab::fault::Rng;

use super::space::{pick, Cell, Class, Target, LIVENESS, LIVENESS_OBJECTS};
use super::{Oracle, Sighting};
use crate::results::{ScenarioResult, VerdictKind};

/// One verbs operation of a requester batch: its wr_id and where its result
/// shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// WRITE of `src` into b's `target` (its first 32 bytes).
    Write,
    /// READ of `target`'s bytes 32 to 47 into a's `rdst`.
    Read,
    /// FetchAdd on `target` at 56 (no byte the READ reads, which a resend
    /// could run after it): the original into a's `adst`.
    FetchAdd,
}

impl Op {
    const ALL: [Op; 3] = [Op::Write, Op::Read, Op::FetchAdd];

    fn wr_id(self) -> u64 {
        match self {
            Op::Write => 1,
            Op::Read => 2,
            Op::FetchAdd => 3,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Op::Write => "WRITE",
            Op::Read => "READ",
            Op::FetchAdd => "FetchAdd",
        }
    }

    /// The memory verdict that shows it landed: `memory of MR X on E …`.
    fn memory(self) -> (&'static str, &'static str) {
        match self {
            Op::Write => ("b", "target"),
            Op::Read => ("a", "rdst"),
            Op::FetchAdd => ("a", "adst"),
        }
    }

    fn step(self) -> &'static str {
        match self {
            Op::Write => "[[step]]\non = \"a\"\nop = \"write\"\nqp = \"rc\"\nwr_id = 1\nsge = [{ mr = \"src\" }]\nremote = { mr = \"target\" }\n",
            Op::Read => "[[step]]\non = \"a\"\nop = \"read\"\nqp = \"rc\"\nwr_id = 2\nsge = [{ mr = \"rdst\" }]\nremote = { mr = \"target\", offset = 32 }\n",
            Op::FetchAdd => "[[step]]\non = \"a\"\nop = \"fetch_add\"\nqp = \"rc\"\nwr_id = 3\nsge = [{ mr = \"adst\" }]\nremote = { mr = \"target\", offset = 56 }\nadd = 1\n",
        }
    }

    fn expect(self) -> &'static str {
        match self {
            Op::Write => "[[expect.memory]]\non = \"b\"\nmr = \"target\"\nequals = { bytes = \"a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1\" }\noutside = \"unchanged\"\n",
            Op::Read => "[[expect.memory]]\non = \"a\"\nmr = \"rdst\"\nequals = { pattern = \"c3\" }\noutside = \"unchanged\"\n",
            Op::FetchAdd => "[[expect.memory]]\non = \"a\"\nmr = \"adst\"\nequals = { pattern = \"c3\" }\noutside = \"unchanged\"\n",
        }
    }

    /// The opcode of its request.
    fn request(self) -> Opcode {
        Opcode(match self {
            Op::Write => 0x0a,
            Op::Read => 0x0c,
            Op::FetchAdd => 0x14,
        })
    }
}

/// One switch rule of a requester batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FaultGen {
    pub(crate) rule: String,
    /// A response this rule builds carries the data of `op` (a READ response,
    /// an atomic's original value): the requester rightly writes what it says.
    /// `short`: fewer bytes than the READ asked for.
    supplies: Option<(Op, bool)>,
    /// Whose frames it matches.
    from: &'static str,
    pub(crate) class: Class,
    /// The opcode of the frames it matches.
    pub(crate) opcode: Opcode,
}

/// A requester batch: its operations, and the rules a minimisation chooses from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequesterBatch {
    pub(crate) ops: Vec<Op>,
    pub(crate) faults: Vec<FaultGen>,
}

const ACK: Opcode = Opcode(0x11);
const READ_RESPONSE_ONLY: Opcode = Opcode(0x10);
const ATOMIC_ACK: Opcode = Opcode(0x12);

impl RequesterBatch {
    pub(crate) fn generate(rng: &mut Rng, n: usize) -> RequesterBatch {
        let mut ops: Vec<Op> = Op::ALL.into_iter().filter(|_| rng.next_f64() < 0.7).collect();
        if ops.is_empty() {
            ops.push(pick(rng, &Op::ALL));
        }
        let faults = (0..n.clamp(1, 4)).map(|_| Self::fault(rng, &ops)).collect();
        RequesterBatch { ops, faults }
    }

    fn fault(rng: &mut Rng, ops: &[Op]) -> FaultGen {
        let op = pick(rng, ops);
        let nth = 1 + rng.next_u64() % 2;
        let resp = match op {
            Op::Write => (ACK, "ack"),
            Op::Read => (READ_RESPONSE_ONLY, "read-response-only"),
            Op::FetchAdd => (ATOMIC_ACK, "atomic-ack"),
        };
        let req = match op {
            Op::Write => "write-only",
            Op::Read => "read-request",
            Op::FetchAdd => "fetchadd",
        };
        let b = |class, rule: String| FaultGen {
            rule,
            from: "b",
            class,
            opcode: resp.0,
            supplies: None,
        };
        let a = |class, rule: String| FaultGen {
            rule,
            from: "a",
            class,
            opcode: op.request(),
            supplies: None,
        };
        match rng.next_u64() % 9 {
            0 => b(Class::Drop, format!("drop op={} nth={nth}", resp.1)),
            1 => b(Class::Dup, format!("dup op={} copies={}", resp.1, 1 + rng.next_u64() % 2)),
            2 => b(Class::Delay, format!("delay op={} ms={}", resp.1, 5 + rng.next_u64() % 40)),
            3 => b(Class::Delay, format!("reorder op={} ms=50", resp.1)),
            4 => b(
                Class::Corrupt,
                format!("corrupt op={} at=bth+{} icrc=fix", resp.1, 4 + rng.next_u64() % 8),
            ),
            5 => a(
                Class::Synth,
                format!(
                    "respond op={req} nth={nth} with=ack real={}",
                    pick(rng, &["keep", "withhold", "lost"])
                ),
            ),
            6 => a(
                Class::Synth,
                format!(
                    "respond op={req} nth={nth} with=nak code={} real=withhold",
                    pick(
                        rng,
                        &[
                            "psn_sequence_error",
                            "invalid_request",
                            "remote_access_error",
                            "remote_operational_error"
                        ]
                    )
                ),
            ),
            7 => a(
                Class::Synth,
                format!(
                    "respond op={req} nth=1 with=ack rpsn=+{} real={}",
                    1 + rng.next_u64() % 8,
                    pick(rng, &["keep", "lost"])
                ),
            ),
            _ => match op {
                Op::Read => {
                    // Shorter than the 16 bytes asked for: the requester must not
                    // complete the READ successfully on it (IBA chapter 9: a
                    // READ's responses carry the whole DMA length it asked for).
                    let len = pick(rng, &[0u32, 8, 15]);
                    FaultGen {
                        supplies: Some((Op::Read, true)),
                        ..a(
                            Class::Synth,
                            format!("respond op=read-request nth=1 with=read-response len={len} real=withhold"),
                        )
                    }
                }
                Op::FetchAdd => FaultGen {
                    supplies: Some((Op::FetchAdd, false)),
                    ..a(
                        Class::Synth,
                        format!(
                            "respond op=fetchadd nth=1 with=atomic-ack orig={} real=withhold",
                            rng.next_u64() >> 1
                        ),
                    )
                },
                Op::Write => a(
                    Class::Synth,
                    format!(
                        "respond op=write-only nth=1 with=rnr timer={} real=withhold",
                        1 + rng.next_u64() % 31
                    ),
                ),
            },
        }
    }

    /// Its coverage cells: each rule's class on the opcode it matches.
    pub(crate) fn cells(&self) -> Vec<Cell> {
        self.faults.iter().map(|f| (f.opcode, f.class, Target::Requester)).collect()
    }

    pub(crate) fn describe(&self, i: usize) -> String {
        self.faults
            .get(i)
            .map(|f| format!("{} (frames from {})", f.rule, f.from))
            .unwrap_or_default()
    }

    /// The batch as a scenario, with only the rules `keep`.
    pub(crate) fn toml(&self, keep: &[usize], name: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "name = \"{name}\"");
        s.push_str(SETUP);
        s.push_str(LIVENESS_OBJECTS);
        for op in &self.ops {
            s.push('\n');
            s.push_str(op.step());
        }
        for f in keep.iter().filter_map(|&i| self.faults.get(i)) {
            let _ = write!(
                s,
                "\n[[fault]]\nrule = \"{}\"\nfrom = \"{}\"\nqp = \"rc\"\n",
                f.rule, f.from
            );
        }
        s.push_str(LIVENESS);
        for op in &self.ops {
            let _ = write!(
                s,
                "\n[[expect.completion]]\non = \"a\"\nwr_id = {}\nstatus = \"IBV_WC_SUCCESS\"\n\n{}",
                op.wr_id(),
                op.expect()
            );
        }
        s
    }

    /// What the requester oracle sees, with the rules `keep`: an operation that
    /// completed successfully while its memory does not show it (unless a kept
    /// rule's response supplied that data: then only a READ completed on a
    /// response shorter than it asked for), or one that never completed.
    pub(crate) fn sightings(&self, keep: &[usize], r: &ScenarioResult, out: &mut Vec<Sighting>) {
        let supplied = |op: Op| {
            keep.iter().filter_map(|&i| self.faults.get(i)).find_map(|f| match f.supplies {
                Some((o, short)) if o == op => Some(short),
                _ => None,
            })
        };
        for op in &self.ops {
            let which = format!("completion of wr_id {} on a", op.wr_id());
            let Some(c) =
                r.verdicts.iter().find(|v| v.kind == VerdictKind::Completion && v.what == which)
            else {
                continue;
            };
            let (on, mr) = op.memory();
            let mem = r.verdicts.iter().find(|v| {
                v.kind == VerdictKind::Memory
                    && v.what.starts_with(&format!("memory of MR {mr} on {on}"))
            });
            let m = mem.map(|m| m.actual.clone()).unwrap_or_default();
            match supplied(*op) {
                Some(true) if c.pass => out.push(Sighting {
                    oracle: Oracle::Protocol,
                    signature: format!("the requester completed a {} successfully on a response shorter than it asked for", op.name()),
                    detail: format!("{which}: {}; MR {mr} on {on} holds {m}", c.actual),
                }),
                Some(_) => {}
                None if c.pass && mem.is_some_and(|m| !m.pass) => out.push(Sighting {
                    oracle: Oracle::Protocol,
                    signature: format!("the requester completed a {} successfully, but its memory does not show it", op.name()),
                    detail: format!("{which}: {}; MR {mr} on {on} holds {m}", c.actual),
                }),
                None => {}
            }
            if !c.pass && c.actual.starts_with("no such completion") {
                out.push(Sighting {
                    oracle: Oracle::Liveness,
                    signature: format!("a {} never completed, successfully or not", op.name()),
                    detail: format!("{which}: {}", c.actual),
                });
            }
        }
    }
}

/// Every cell a requester batch could reach.
pub(crate) fn all_cells() -> Vec<Cell> {
    let mut out = Vec::new();
    for op in Op::ALL {
        let resp = match op {
            Op::Write => ACK,
            Op::Read => READ_RESPONSE_ONLY,
            Op::FetchAdd => ATOMIC_ACK,
        };
        for c in [Class::Drop, Class::Dup, Class::Delay, Class::Corrupt] {
            out.push((resp, c, Target::Requester));
        }
        out.push((op.request(), Class::Synth, Target::Requester));
    }
    out
}

/// A QP whose requester gives up soon (ACK timeout 16.8 ms, 3 retries, 3 RNR
/// retries) and the MRs of the three operations.
const SETUP: &str = r#"format = 3
timeout_ms = 30000

[endpoints.a]
[endpoints.b]

[[qp]]
name = "rc"
type = "rc"
between = ["b", "a"]
psn = { a = 100, b = 500 }
timeout = 12
retry_cnt = 3
rnr_retry = 3
access = { b = ["remote_write", "remote_read", "remote_atomic"] }

[[mr]]
name = "src"
on = "a"
size = 32
init = { pattern = "a1" }

[[mr]]
name = "rdst"
on = "a"
size = 16
access = ["local_write"]

[[mr]]
name = "adst"
on = "a"
size = 8
access = ["local_write"]

[[mr]]
name = "target"
on = "b"
size = 64
access = ["local_write", "remote_write", "remote_read", "remote_atomic"]
init = { pattern = "c3" }
"#;
