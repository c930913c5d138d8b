//! Requester batches: real verbs traffic from VM a (a WRITE, a READ, a
//! FetchAdd, a SEND with Invalidate on one RC QP) while the switch drops,
//! duplicates, delays, reorders or corrupts b's responses, or answers a's
//! requests in b's place with responses of its own (`respond`: ACKs, NAKs, RNR
//! NAKs, short READ responses, ghost ACKs for PSNs never sent). The SEND with
//! Invalidate names one of b's keys: a bound type 2 window (which it may
//! invalidate), a type 1 window, a type 2 window never bound, or an rkey of
//! nothing (which it may not: IBA 10.6.7, NAK Invalid Request).
//!
//! What a requester must never do, whatever the responses: complete a READ or
//! an atomic successfully without the data it asked for in its buffer, or a
//! WRITE successfully that never landed; leave a WR without any completion;
//! write outside its MRs. Nor may the two ends disagree: a SEND that completed
//! successfully at a consumed a receive at b that completed successfully. The
//! batch states the ops' spec answers and their memory as expectations;
//! [`RequesterBatch::sightings`] reads the pairs (a success whose memory is
//! wrong is the finding, a failure with its memory unwritten is not).
//!
//! Owns: the requester batch, its fault menu, its oracle. Imports: the seeded
//! RNG, the results' verdicts and observations, `super::space`'s coverage cell
//! types.
use std::fmt::Write as _;

use dissector::wire::Opcode;
use lab::fault::Rng;

use super::space::{pick, Cell, Class, Target, LIVENESS, LIVENESS_OBJECTS};
use super::{Oracle, Sighting};
use crate::judge::observe::completion_key;
use crate::results::{ScenarioResult, VerdictKind};
use crate::verbs::WcStatus;

/// The key a SEND with Invalidate names, of b's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inv {
    /// Type 2 window `w2`, bound: the one key it may invalidate.
    Bound,
    /// Type 1 window `w1`, bound (o10-37.2.26: never invalidated).
    Type1,
    /// Type 2 window `w2u`, never bound.
    Unbound,
    /// An rkey no MR or window of b's has.
    Nothing,
}

impl Inv {
    const ALL: [Inv; 4] = [Inv::Bound, Inv::Type1, Inv::Unbound, Inv::Nothing];

    fn toml(self) -> &'static str {
        match self {
            Inv::Bound => "{ mw = \"w2\" }",
            Inv::Type1 => "{ mw = \"w1\" }",
            Inv::Unbound => "{ mw = \"w2u\" }",
            Inv::Nothing => "{ rkey = 0x5eed0000 }",
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Inv::Bound => "a bound type 2 window",
            Inv::Type1 => "a type 1 window",
            Inv::Unbound => "a type 2 window never bound",
            Inv::Nothing => "an rkey of nothing",
        }
    }

    /// IBA's answer, at both ends: the SEND's completion at a and the
    /// receive's at b (10.6.7.2: an R_Key that cannot be invalidated is an
    /// invalid request, NAKed; the receive completes in error).
    fn status(self) -> WcStatus {
        match self {
            Inv::Bound => WcStatus::SUCCESS,
            _ => WcStatus::REM_INV_REQ_ERR,
        }
    }
}

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
    /// SEND with Invalidate of `msg` into b's receive [`RECV`] in `rbuf`.
    SendInv(Inv),
}

/// The wr_id of b's receive a SEND with Invalidate consumes.
const RECV: u64 = 14;

impl Op {
    const BASIC: [Op; 3] = [Op::Write, Op::Read, Op::FetchAdd];

    fn wr_id(self) -> u64 {
        match self {
            Op::Write => 1,
            Op::Read => 2,
            Op::FetchAdd => 3,
            Op::SendInv(_) => 4,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Op::Write => "WRITE",
            Op::Read => "READ",
            Op::FetchAdd => "FetchAdd",
            Op::SendInv(_) => "SEND with Invalidate",
        }
    }

    fn describe(self) -> String {
        match self {
            Op::SendInv(k) => format!("a's SEND with Invalidate naming {}", k.name()),
            op => format!("a's {}", op.name()),
        }
    }

    /// The memory verdict that shows it landed: `memory of MR X on E …`.
    fn memory(self) -> (&'static str, &'static str) {
        match self {
            Op::Write => ("b", "target"),
            Op::Read => ("a", "rdst"),
            Op::FetchAdd => ("a", "adst"),
            Op::SendInv(_) => ("b", "rbuf"),
        }
    }

    fn step(self) -> String {
        match self {
            Op::Write => "[[step]]\non = \"a\"\nop = \"write\"\nqp = \"rc\"\nwr_id = 1\nsge = [{ mr = \"src\" }]\nremote = { mr = \"target\" }\n".into(),
            Op::Read => "[[step]]\non = \"a\"\nop = \"read\"\nqp = \"rc\"\nwr_id = 2\nsge = [{ mr = \"rdst\" }]\nremote = { mr = \"target\", offset = 32 }\n".into(),
            Op::FetchAdd => "[[step]]\non = \"a\"\nop = \"fetch_add\"\nqp = \"rc\"\nwr_id = 3\nsge = [{ mr = \"adst\" }]\nremote = { mr = \"target\", offset = 56 }\nadd = 1\n".into(),
            Op::SendInv(k) => format!("[[step]]\non = \"a\"\nop = \"send_inv\"\nqp = \"rc\"\nwr_id = 4\nsge = [{{ mr = \"msg\" }}]\ninvalidate = {}\n", k.toml()),
        }
    }

    /// Its expectations: IBA's answer and the memory that shows it.
    fn expect(self) -> String {
        let done = |on: &str, wr_id: u64, status: WcStatus| {
            format!(
                "\n[[expect.completion]]\non = \"{on}\"\nwr_id = {wr_id}\nstatus = \"{status}\"\n"
            )
        };
        match self {
            Op::Write => done("a", 1, WcStatus::SUCCESS) + "\n[[expect.memory]]\non = \"b\"\nmr = \"target\"\nequals = { bytes = \"a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1\" }\noutside = \"unchanged\"\n",
            Op::Read => done("a", 2, WcStatus::SUCCESS) + "\n[[expect.memory]]\non = \"a\"\nmr = \"rdst\"\nequals = { pattern = \"c3\" }\noutside = \"unchanged\"\n",
            Op::FetchAdd => done("a", 3, WcStatus::SUCCESS) + "\n[[expect.memory]]\non = \"a\"\nmr = \"adst\"\nequals = { pattern = \"c3\" }\noutside = \"unchanged\"\n",
            // A receive completed in error leaves its buffer undefined (IBA
            // 10.7.2.2): only a successful one's bytes are stated.
            Op::SendInv(k) => {
                let mut s = done("a", 4, k.status()) + &done("b", RECV, k.status());
                if k == Inv::Bound {
                    s.push_str("\n[[expect.memory]]\non = \"b\"\nmr = \"rbuf\"\nequals = { text = \"inv-send\" }\noutside = \"unchanged\"\n");
                }
                s
            }
        }
    }

    /// The opcode of its request.
    fn request(self) -> Opcode {
        Opcode(match self {
            Op::Write => 0x0a,
            Op::Read => 0x0c,
            Op::FetchAdd => 0x14,
            Op::SendInv(_) => 0x17,
        })
    }

    /// The opcode of its response.
    fn response(self) -> (Opcode, &'static str) {
        match self {
            Op::Write | Op::SendInv(_) => (ACK, "ack"),
            Op::Read => (READ_RESPONSE_ONLY, "read-response-only"),
            Op::FetchAdd => (ATOMIC_ACK, "atomic-ack"),
        }
    }

    /// Its request as the switch's rules name it.
    fn rule_name(self) -> &'static str {
        match self {
            Op::Write => "write-only",
            Op::Read => "read-request",
            Op::FetchAdd => "fetchadd",
            Op::SendInv(_) => "rc-send-only-with-invalidate",
        }
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
        let mut ops: Vec<Op> = Op::BASIC.into_iter().filter(|_| rng.next_f64() < 0.7).collect();
        if rng.next_f64() < 0.5 {
            ops.push(Op::SendInv(pick(rng, &Inv::ALL)));
        }
        if ops.is_empty() {
            ops.push(pick(rng, &Op::BASIC));
        }
        let faults = (0..n.clamp(1, 4)).map(|_| Self::fault(rng, &ops)).collect();
        RequesterBatch { ops, faults }
    }

    fn fault(rng: &mut Rng, ops: &[Op]) -> FaultGen {
        let op = pick(rng, ops);
        let nth = 1 + rng.next_u64() % 2;
        let resp = op.response();
        let req = op.rule_name();
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
            5 => {
                let real = pick(rng, &["keep", "withhold", "lost"]);
                let f = a(Class::Synth, format!("respond op={req} nth={nth} with=ack real={real}"));
                match op {
                    // An ACK at the request's own PSN is a WRITE's or a SEND's
                    // whole answer: the requester rightly completes it, even
                    // where the request never arrived (`real=lost`).
                    Op::Write | Op::SendInv(_) => FaultGen { supplies: Some((op, false)), ..f },
                    _ => f,
                }
            }
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
                Op::Write | Op::SendInv(_) => a(
                    Class::Synth,
                    format!(
                        "respond op={req} nth=1 with=rnr timer={} real=withhold",
                        1 + rng.next_u64() % 31
                    ),
                ),
            },
        }
    }

    /// What a minimisation chooses from: the rules, then the operations.
    pub(crate) fn items(&self) -> usize {
        self.faults.len() + self.ops.len()
    }

    /// The operations among `keep`.
    fn kept_ops(&self, keep: &[usize]) -> Vec<Op> {
        keep.iter()
            .filter_map(|&i| i.checked_sub(self.faults.len()))
            .filter_map(|i| self.ops.get(i).copied())
            .collect()
    }

    /// Its coverage cells: each rule's class on the opcode it matches, and
    /// the key a SEND with Invalidate names.
    pub(crate) fn cells(&self) -> Vec<Cell> {
        let keys = self.ops.iter().filter(|op| matches!(op, Op::SendInv(_)));
        self.faults
            .iter()
            .map(|f| (f.opcode, f.class, Target::Requester))
            .chain(keys.map(|op| (op.request(), Class::Ieth, Target::Rc)))
            .collect()
    }

    pub(crate) fn describe(&self, i: usize) -> String {
        match (self.faults.get(i), i.checked_sub(self.faults.len()).and_then(|i| self.ops.get(i))) {
            (Some(f), _) => format!("{} (frames from {})", f.rule, f.from),
            (None, Some(op)) => op.describe(),
            (None, None) => String::new(),
        }
    }

    /// The batch as a scenario, with only the rules and operations `keep`.
    pub(crate) fn toml(&self, keep: &[usize], name: &str) -> String {
        let ops = self.kept_ops(keep);
        let inv = ops.iter().any(|op| matches!(op, Op::SendInv(_)));
        let mut s = String::new();
        let _ = writeln!(s, "name = {}", toml_edit::Value::from(name));
        if inv {
            s.push_str("requires = [\"mw_type1\", \"mw_type2\"]\n");
        }
        s.push_str(SETUP);
        if inv {
            s.push_str(INVALIDATE_SETUP);
        }
        s.push_str(LIVENESS_OBJECTS);
        for op in &ops {
            s.push('\n');
            s.push_str(&op.step());
        }
        for f in keep.iter().filter_map(|&i| self.faults.get(i)) {
            let _ = write!(
                s,
                "\n[[fault]]\nrule = \"{}\"\nfrom = \"{}\"\nqp = \"rc\"\n",
                f.rule, f.from
            );
        }
        s.push_str(LIVENESS);
        for op in &ops {
            s.push_str(&op.expect());
        }
        s
    }

    /// What the requester oracle sees, with the rules and operations `keep`:
    /// an operation that completed successfully while its memory does not show
    /// it (unless a kept rule's response supplied that data: then only a READ
    /// completed on a response shorter than it asked for), a SEND that
    /// completed successfully at a while b's receive did not, or an operation
    /// that never completed.
    pub(crate) fn sightings(&self, keep: &[usize], r: &ScenarioResult, out: &mut Vec<Sighting>) {
        let supplied = |op: Op| {
            keep.iter().filter_map(|&i| self.faults.get(i)).find_map(|f| match f.supplies {
                Some((o, short)) if o == op => Some(short),
                _ => None,
            })
        };
        let success = WcStatus::SUCCESS.to_string();
        for op in self.kept_ops(keep) {
            let which = format!("completion of wr_id {} on a", op.wr_id());
            let status = r.observations.get(&completion_key("a", op.wr_id()));
            let Some(c) =
                r.verdicts.iter().find(|v| v.kind == VerdictKind::Completion && v.what == which)
            else {
                continue;
            };
            let succeeded = status == Some(&success);
            let (on, mr) = op.memory();
            let mem = r.verdicts.iter().find(|v| {
                v.kind == VerdictKind::Memory
                    && v.what.starts_with(&format!("memory of MR {mr} on {on}"))
            });
            let m = mem.map(|m| m.actual.clone()).unwrap_or_default();
            match supplied(op) {
                Some(true) if succeeded => out.push(Sighting {
                    oracle: Oracle::Protocol,
                    signature: format!("the requester completed a {} successfully on a response shorter than it asked for", op.name()),
                    detail: format!("{which}: {}; MR {mr} on {on} holds {m}", c.actual),
                }),
                Some(_) => {}
                None if succeeded && mem.is_some_and(|m| !m.held()) => out.push(Sighting {
                    oracle: Oracle::Protocol,
                    signature: format!("the requester completed a {} successfully, but its memory does not show it", op.name()),
                    detail: format!("{which}: {}; MR {mr} on {on} holds {m}", c.actual),
                }),
                None => {}
            }
            // Both ends of an RC SEND agree: the ACK that completes it at a
            // follows the receive it consumed at b (IBA 9.7.5: a request is
            // acknowledged once executed; one in error is NAKed instead).
            if let (Op::SendInv(k), true, None) = (op, succeeded, supplied(op)) {
                let recv = r.observations.get(&completion_key("b", RECV));
                if recv != Some(&success) {
                    let at_b = recv.map_or("never completed", String::as_str);
                    out.push(Sighting {
                        oracle: Oracle::Protocol,
                        signature: format!(
                            "a SEND with Invalidate naming {} completed successfully at a while b's receive {}",
                            k.name(),
                            if recv.is_some() { "completed in error" } else { "never completed" }
                        ),
                        detail: format!("{which}: {}; b's receive (wr_id {RECV}): {at_b}", c.actual),
                    });
                }
            }
            if status.is_none() {
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
    for op in Op::BASIC.into_iter().chain([Op::SendInv(Inv::Bound)]) {
        for c in [Class::Drop, Class::Dup, Class::Delay, Class::Corrupt] {
            out.push((op.response().0, c, Target::Requester));
        }
        out.push((op.request(), Class::Synth, Target::Requester));
    }
    out.push((Op::SendInv(Inv::Bound).request(), Class::Ieth, Target::Rc));
    out.sort();
    out.dedup();
    out
}

/// b's windows and the receive a SEND with Invalidate consumes: `w1` (type 1)
/// and `w2` (type 2) bound over `wtarget`, `w2u` (type 2) never bound.
const INVALIDATE_SETUP: &str = r#"
[[mr]]
name = "msg"
on = "a"
size = 8
init = { text = "inv-send" }

[[mr]]
name = "wtarget"
on = "b"
size = 16
access = ["local_write", "mw_bind"]

[[mr]]
name = "rbuf"
on = "b"
size = 8
access = ["local_write"]

[[mw]]
name = "w1"
on = "b"
type = 1

[[mw]]
name = "w2"
on = "b"
type = 2

[[mw]]
name = "w2u"
on = "b"
type = 2

[[step]]
on = "b"
op = "bind_mw"
qp = "rc"
wr_id = 10
mw = "w1"
mr = "wtarget"
offset = 0
len = 16
access = ["remote_write"]

[[step]]
on = "b"
op = "bind_mw"
qp = "rc"
wr_id = 11
mw = "w2"
mr = "wtarget"
access = ["remote_write"]

[[step]]
on = "b"
op = "wait_completions"
count = 2

[[step]]
on = "b"
op = "post_recv"
qp = "rc"
wr_id = 14
sge = [{ mr = "rbuf" }]
"#;

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
