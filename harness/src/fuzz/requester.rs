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
//! The batch's setup and each operation's step with its expectations are
//! fixtures (`fixtures/requester-*.toml`); the switch's rules are built as
//! `toml_edit` tables ([`super::doc`]).
//!
//! Owns: the requester batch, its fault menu, its fixtures, its oracle. Imports:
//! the seeded RNG, the results' verdicts and observations, `super::space`'s
//! coverage cell types, `super::doc`.
use dissector::wire::Opcode;
use lab::fault::Rng;
use toml_edit::Table;

use super::doc::Doc;
use super::space::{pick, Cell, Class, Target, LIVENESS, LIVENESS_OBJECTS};
use super::{Oracle, Sighting};
use crate::judge::observe::completion_key;
use crate::results::{ScenarioResult, VerdictKind};
use crate::vocab::WcStatus;

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

    pub(super) fn name(self) -> &'static str {
        match self {
            Inv::Bound => "a bound type 2 window",
            Inv::Type1 => "a type 1 window",
            Inv::Unbound => "a type 2 window never bound",
            Inv::Nothing => "an rkey of nothing",
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
    /// a binds its own type 2 window `aw` over `abuf` on `rc`: a work request
    /// of the send queue that never reaches the wire.
    Bind,
    /// a invalidates `aw` (IBV_WR_LOCAL_INV), after the bind.
    LocalInv,
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
            Op::Bind => 5,
            Op::LocalInv => 6,
        }
    }

    /// It is a request on the wire (a rule can answer it, drop its response).
    pub(super) fn on_wire(self) -> bool {
        !matches!(self, Op::Bind | Op::LocalInv)
    }

    fn name(self) -> &'static str {
        match self {
            Op::Write => "WRITE",
            Op::Read => "READ",
            Op::FetchAdd => "FetchAdd",
            Op::SendInv(_) => "SEND with Invalidate",
            Op::Bind => "bind of a type 2 window",
            Op::LocalInv => "local invalidate of a window",
        }
    }

    fn describe(self) -> String {
        match self {
            Op::SendInv(k) => format!("a's SEND with Invalidate naming {}", k.name()),
            op => format!("a's {}", op.name()),
        }
    }

    /// The memory verdict that shows it landed: `memory of MR X on E …`; a
    /// window operation changes no memory.
    fn memory(self) -> Option<(&'static str, &'static str)> {
        match self {
            Op::Write => Some(("b", "target")),
            Op::Read => Some(("a", "rdst")),
            Op::FetchAdd => Some(("a", "adst")),
            Op::SendInv(_) => Some(("b", "rbuf")),
            Op::Bind | Op::LocalInv => None,
        }
    }

    /// Its fixture: its step, then its expectations (IBA's answer and the
    /// memory that shows it). A receive completed in error leaves its buffer
    /// undefined (IBA 10.7.2.2): only a successful one's bytes are stated.
    fn fixture(self) -> &'static str {
        match self {
            Op::Write => WRITE,
            Op::Read => READ,
            Op::FetchAdd => FETCH_ADD,
            Op::SendInv(Inv::Bound) => SEND_INV_BOUND,
            Op::SendInv(Inv::Type1) => SEND_INV_TYPE1,
            Op::SendInv(Inv::Unbound) => SEND_INV_UNBOUND,
            Op::SendInv(Inv::Nothing) => SEND_INV_NOTHING,
            Op::Bind => BIND,
            Op::LocalInv => LOCAL_INV,
        }
    }

    /// The opcode of its request (of an operation [`Op::on_wire`]).
    fn request(self) -> Opcode {
        Opcode(match self {
            Op::Write => 0x0a,
            Op::Read => 0x0c,
            Op::FetchAdd => 0x14,
            Op::SendInv(_) => 0x17,
            Op::Bind | Op::LocalInv => unreachable!("a window operation sends no request"),
        })
    }

    /// The opcode of its response (of an operation [`Op::on_wire`]).
    fn response(self) -> (Opcode, &'static str) {
        match self {
            Op::Write | Op::SendInv(_) => (ACK, "ack"),
            Op::Bind | Op::LocalInv => unreachable!("a window operation draws no response"),
            Op::Read => (READ_RESPONSE_ONLY, "read-response-only"),
            Op::FetchAdd => (ATOMIC_ACK, "atomic-ack"),
        }
    }

    /// Its request as the switch's rules name it (of an operation
    /// [`Op::on_wire`]).
    fn rule_name(self) -> &'static str {
        match self {
            Op::Write => "write-only",
            Op::Read => "read-request",
            Op::FetchAdd => "fetchadd",
            Op::SendInv(_) => "rc-send-only-with-invalidate",
            Op::Bind | Op::LocalInv => unreachable!("no rule matches a window operation"),
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
        // Then, drawn after the rest (a batch drawn before they were is drawn
        // the same), a's own window operations, somewhere among its requests:
        // a bind, then maybe its invalidation.
        if rng.next_f64() < 0.4 {
            let at = (rng.next_u64() % (ops.len() as u64 + 1)) as usize;
            ops.insert(at, Op::Bind);
            if rng.next_f64() < 0.5 {
                let after = at + 1 + (rng.next_u64() % (ops.len() - at) as u64) as usize;
                ops.insert(after, Op::LocalInv);
            }
        }
        RequesterBatch { ops, faults }
    }

    /// One rule drawn again, or (with fewer than 4) one more.
    pub(super) fn mutate(&mut self, rng: &mut Rng) {
        let f = Self::fault(rng, &self.ops);
        if self.faults.len() < 4 && rng.next_f64() < 0.5 {
            self.faults.push(f);
        } else if !self.faults.is_empty() {
            let i = (rng.next_u64() % self.faults.len() as u64) as usize;
            self.faults[i] = f;
        }
    }

    /// A rule on one of `ops` (each [`Op::on_wire`]).
    fn fault(rng: &mut Rng, ops: &[Op]) -> FaultGen {
        let wire: Vec<Op> = ops.iter().copied().filter(|op| op.on_wire()).collect();
        let op = pick(rng, &wire);
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
                Op::Write | Op::SendInv(_) | Op::Bind | Op::LocalInv => a(
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

    /// Table `t` (at `path`) is one of the items `keep`: a switch rule, a kept
    /// operation's step on a, or the completions and memory its fixture expects.
    pub(super) fn about(&self, keep: &[usize], path: &str, t: &Table) -> bool {
        let ops = self.kept_ops(keep);
        let s = |k: &str| t.get(k).and_then(|v| v.as_str());
        let wr_id = t.get("wr_id").and_then(|v| v.as_integer());
        let done_by = |op: &Op| -> Vec<(&str, u64)> {
            let mut v = vec![("a", op.wr_id())];
            if matches!(op, Op::SendInv(_)) {
                v.push(("b", RECV));
            }
            v
        };
        match path {
            "fault" => true,
            "step" => s("on") == Some("a") && ops.iter().any(|op| wr_id == Some(op.wr_id() as i64)),
            "expect.completion" => ops
                .iter()
                .flat_map(done_by)
                .any(|(on, id)| s("on") == Some(on) && wr_id == Some(id as i64)),
            "expect.memory" => ops
                .iter()
                .filter_map(|op| op.memory())
                .any(|(on, mr)| s("on") == Some(on) && s("mr") == Some(mr)),
            _ => false,
        }
    }

    /// The batch as a scenario (after its header and name in `doc`), with only
    /// the rules and operations `keep`.
    pub(super) fn write(&self, keep: &[usize], doc: &mut Doc) {
        let ops = self.kept_ops(keep);
        doc.fixture(SETUP);
        if ops.iter().any(|op| matches!(op, Op::SendInv(_))) {
            doc.fixture(INVALIDATE_SETUP);
        }
        if ops.iter().any(|op| matches!(op, Op::Bind | Op::LocalInv)) {
            doc.fixture(WINDOW_SETUP);
        }
        doc.fixture(LIVENESS_OBJECTS);
        for op in &ops {
            doc.fixture_part(op.fixture(), "step");
        }
        for f in keep.iter().filter_map(|&i| self.faults.get(i)) {
            let mut t = Table::new();
            t.insert("rule", toml_edit::value(f.rule.as_str()));
            t.insert("from", toml_edit::value(f.from));
            t.insert("qp", toml_edit::value("rc"));
            doc.push(&["fault"], t, None);
        }
        doc.fixture(LIVENESS);
        for op in &ops {
            doc.fixture_part(op.fixture(), "expect");
        }
    }

    /// What the requester oracle sees, with the rules and operations `keep`:
    /// an operation that completed successfully while its memory does not show
    /// it (unless a kept rule's response supplied that data: then only a READ
    /// completed on a response shorter than it asked for), a SEND that
    /// completed successfully at a while b's receive did not, an operation
    /// that never completed, or one that completed successfully behind one that
    /// completed in error.
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
            let (on, mr) = op.memory().unwrap_or_default();
            let mem = op.memory().and_then(|_| {
                r.verdicts.iter().find(|v| {
                    v.kind == VerdictKind::Memory
                        && v.what.starts_with(&format!("memory of MR {mr} on {on}"))
                })
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
        // A send queue completes in the order it was posted, and a WR completed
        // in error leaves the QP in the error state: every WR behind it
        // completes flushed (IBV_WC_WR_FLUSH_ERR), none successfully (IBA
        // 10.3.1, the Error state). A window operation, which never reaches
        // the wire, is where a device may carry one out regardless.
        let status = |op: Op| r.observations.get(&completion_key("a", op.wr_id()));
        let ops = self.kept_ops(keep);
        let failed = ops.iter().position(|&op| status(op).is_some_and(|s| *s != success));
        if let Some(f) = failed {
            let (first, s_first) = (ops[f], status(ops[f]).cloned().unwrap_or_default());
            if let Some(&later) = ops[f + 1..].iter().find(|&&op| status(op) == Some(&success)) {
                out.push(Sighting {
                    oracle: Oracle::Protocol,
                    signature: format!(
                        "a's {} completed successfully behind a's {}, which completed in error",
                        later.name(),
                        first.name()
                    ),
                    detail: format!(
                        "completion of wr_id {} on a: {s_first}; then wr_id {}: {success}",
                        first.wr_id(),
                        later.wr_id()
                    ),
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
/// and `w2` (type 2) bound over `wtarget`, `w2u` (type 2) never bound; and the
/// features they take (`requires`).
const INVALIDATE_SETUP: &str = include_str!("fixtures/requester-invalidate-setup.toml");

/// A QP whose requester gives up soon (ACK timeout 16.8 ms, 3 retries, 3 RNR
/// retries) and the MRs of the three operations.
const SETUP: &str = include_str!("fixtures/requester-setup.toml");

/// Each operation's step and expectations ([`Op::fixture`]).
const WRITE: &str = include_str!("fixtures/requester-write.toml");
const READ: &str = include_str!("fixtures/requester-read.toml");
const FETCH_ADD: &str = include_str!("fixtures/requester-fetch-add.toml");
const SEND_INV_BOUND: &str = include_str!("fixtures/requester-send-inv-bound.toml");
const SEND_INV_TYPE1: &str = include_str!("fixtures/requester-send-inv-type1.toml");
const SEND_INV_UNBOUND: &str = include_str!("fixtures/requester-send-inv-unbound.toml");
const SEND_INV_NOTHING: &str = include_str!("fixtures/requester-send-inv-nothing.toml");
const BIND: &str = include_str!("fixtures/requester-bind.toml");
const LOCAL_INV: &str = include_str!("fixtures/requester-local-inv.toml");

/// a's MR `abuf` and type 2 window `aw`, for its bind and local invalidate.
const WINDOW_SETUP: &str = include_str!("fixtures/requester-window-setup.toml");

#[cfg(test)]
mod tests {
    use super::*;

    /// Each operation's fixture is what the rest of this module takes it for:
    /// a's step with the operation's wr_id, IBA's answer at a (and at b's
    /// receive [`RECV`] for a SEND), the memory [`Op::memory`] names when the
    /// operation succeeds, the key a SEND with Invalidate names, the window a's
    /// own window operations act on.
    #[test]
    fn each_operation_fixture_is_that_operation() {
        let windows = [Op::Bind, Op::LocalInv];
        for op in Op::BASIC.into_iter().chain(Inv::ALL.map(Op::SendInv)).chain(windows) {
            let t: toml::Table = toml::from_str(op.fixture()).expect("TOML");
            let list = |v: &toml::Value| v.as_array().cloned().unwrap_or_default();
            let steps = list(&t["step"]);
            assert_eq!(steps.len(), 1, "{op:?}");
            assert_eq!(steps[0]["on"].as_str(), Some("a"), "{op:?}");
            assert_eq!(steps[0]["wr_id"].as_integer(), Some(op.wr_id() as i64), "{op:?}");
            // IBA 10.6.7.2: an R_Key b may not invalidate is an invalid
            // request, NAKed; the receive it consumed completes in error.
            let status = match op {
                Op::SendInv(k) if k != Inv::Bound => "IBV_WC_REM_INV_REQ_ERR",
                _ => "IBV_WC_SUCCESS",
            };
            let done: Vec<(String, i64, String)> = list(&t["expect"]["completion"])
                .iter()
                .map(|c| {
                    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                    (s("on"), c["wr_id"].as_integer().unwrap_or(-1), s("status"))
                })
                .collect();
            let mut want = vec![("a".to_string(), op.wr_id() as i64, status.to_string())];
            if let Op::SendInv(k) = op {
                want.push(("b".to_string(), RECV as i64, status.to_string()));
                let key = &steps[0]["invalidate"];
                let (name, rkey) = (key.get("mw").and_then(|m| m.as_str()), key.get("rkey"));
                match k {
                    Inv::Bound => assert_eq!(name, Some("w2")),
                    Inv::Type1 => assert_eq!(name, Some("w1")),
                    Inv::Unbound => assert_eq!(name, Some("w2u")),
                    Inv::Nothing => assert!(rkey.is_some(), "{key:?}"),
                }
            }
            if windows.contains(&op) {
                assert_eq!(steps[0]["mw"].as_str(), Some("aw"), "{op:?}");
            }
            assert_eq!(done, want, "{op:?}");
            let memory: Vec<(String, String)> = t["expect"]
                .get("memory")
                .map(list)
                .unwrap_or_default()
                .iter()
                .map(|m| {
                    let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
                    (s("on"), s("mr"))
                })
                .collect();
            let want: Vec<(String, String)> = match op.memory() {
                Some((on, mr)) if status == "IBV_WC_SUCCESS" => vec![(on.into(), mr.into())],
                _ => vec![],
            };
            assert_eq!(memory, want, "{op:?}");
        }
    }
}

#[cfg(test)]
mod drawn {
    use std::path::Path;

    use super::*;
    use crate::results::Verdict;

    /// a's window operations are drawn among its requests, the invalidation
    /// always after the bind; no rule is ever drawn on them; and drawing them
    /// changed nothing else of a batch (its requests and rules are the ones the
    /// same seed drew before they existed: those draws come first).
    #[test]
    fn window_operations_come_among_the_requests_and_after_the_rest() {
        let (mut binds, mut invs) = (0, 0);
        for seed in 0..400 {
            let b = RequesterBatch::generate(&mut Rng::new(seed), 4);
            let bind = b.ops.iter().position(|&o| o == Op::Bind);
            let inv = b.ops.iter().position(|&o| o == Op::LocalInv);
            binds += usize::from(bind.is_some());
            invs += usize::from(inv.is_some());
            if let Some(i) = inv {
                assert!(bind.is_some_and(|b| b < i), "{:?}", b.ops);
            }
            assert!(b.ops.iter().any(|o| o.on_wire()), "{:?}", b.ops);
            // What came before the window operations' draws: the same stream,
            // stopped there, draws the same requests and rules.
            let mut rng = Rng::new(seed);
            let mut ops: Vec<Op> = Op::BASIC.into_iter().filter(|_| rng.next_f64() < 0.7).collect();
            if rng.next_f64() < 0.5 {
                ops.push(Op::SendInv(pick(&mut rng, &Inv::ALL)));
            }
            if ops.is_empty() {
                ops.push(pick(&mut rng, &Op::BASIC));
            }
            let wire: Vec<Op> = b.ops.iter().copied().filter(|o| o.on_wire()).collect();
            assert_eq!(wire, ops, "seed {seed}");
        }
        assert!((100..220).contains(&binds), "{binds} of 400");
        assert!((30..binds).contains(&invs), "{invs} of {binds}");
    }

    /// The queue's order: a WR that completed successfully behind one that
    /// completed in error is a finding; flushed WRs behind it are not.
    #[test]
    fn a_success_behind_an_error_on_the_send_queue_is_seen() {
        let b = RequesterBatch {
            ops: vec![Op::Write, Op::Bind, Op::Read],
            faults: vec![FaultGen {
                rule: "respond op=write-only nth=1 with=nak code=remote_access_error real=withhold"
                    .into(),
                supplies: None,
                from: "a",
                class: Class::Synth,
                opcode: Opcode(0x0a),
            }],
        };
        let keep: Vec<usize> = (0..b.items()).collect();
        let run = |statuses: [&str; 3]| {
            let mut r = ScenarioResult::not_run("x", Path::new("x.toml"), vec![], "");
            for (op, st) in b.ops.iter().zip(statuses) {
                r.observations.insert(completion_key("a", op.wr_id()), st.to_string());
                let what = format!("completion of wr_id {} on a", op.wr_id());
                let pass = st == "IBV_WC_SUCCESS";
                r.verdicts.push(Verdict::new(
                    VerdictKind::Completion,
                    what,
                    pass,
                    "IBV_WC_SUCCESS".into(),
                    st.into(),
                ));
            }
            let mut out = Vec::new();
            b.sightings(&keep, &r, &mut out);
            out.into_iter().map(|s| s.signature).collect::<Vec<_>>()
        };
        let flushed = run(["IBV_WC_REM_ACCESS_ERR", "IBV_WC_WR_FLUSH_ERR", "IBV_WC_WR_FLUSH_ERR"]);
        assert!(flushed.is_empty(), "{flushed:?}");
        let bound = run(["IBV_WC_REM_ACCESS_ERR", "IBV_WC_SUCCESS", "IBV_WC_WR_FLUSH_ERR"]);
        assert_eq!(
            bound,
            ["a's bind of a type 2 window completed successfully behind a's WRITE, which completed in error"]
        );
        let fine = run(["IBV_WC_SUCCESS", "IBV_WC_SUCCESS", "IBV_WC_SUCCESS"]);
        assert!(fine.iter().all(|s| !s.contains("behind")), "{fine:?}");
    }
}
