//! The fuzzer's inputs: batches of crafted requests, each a scenario file.
//!
//! A batch is drawn from `(seed, index)` alone, so any batch of any run can be
//! drawn again. Each probe starts from a well-formed request for the QP it is
//! aimed at (its transport's opcodes from the dissector's table, a remote
//! address inside a real MR, a payload the size an MTU allows), then has up to
//! two fields changed, each change one of the [`Class`]es that mean something
//! to a responder. The batch is written as a scenario (`roce run` runs it as
//! it is); where the specification is unambiguous about a changed field's
//! answer (a bad ICRC, a foreign P_Key, a TVer other than 0, an unknown
//! destination QP, a QP in the error state: dropped silently), the probe gets
//! that expectation, and every batch ends with the oracles every batch has
//! (see [`Batch::toml`]). What every responder batch has is fixtures
//! (`fixtures/responder-*.toml`, `fixtures/plant-*.toml`); the probes and their
//! expectations are built as `toml_edit` tables ([`super::doc`]).
//!
//! Owns: the responder batch, its probes, its fixtures, the whole coverage space
//! ([`all_cells`]). Imports: `super::space`, `super::requester`, `super::doc`, the
//! dissector's opcode table, the lab's seeded RNG, `toml_edit`'s values.
use std::collections::BTreeSet;

use dissector::wire::opcode::{Headers, Kind, OpInfo};
use dissector::wire::{Opcode, Transport};
use lab::fault::Rng;
use toml_edit::{Array, InlineTable, Table, Value};

use super::corpus::{self, Corpus, Message};
use super::doc::{hex, int, Doc};
use super::space::pick;
pub(crate) use super::space::{Cell, Class, Target};
use super::space::{LIVENESS, LIVENESS_OBJECTS};

/// Bytes of the MRs the probes aim at: small, so a change of the address or
/// length lands near their bounds often.
pub(crate) const MR_SIZE: u64 = 64;

/// The lab QPs' path MTU: a seed's payloads are cut to it.
const PMTU: u32 = 1024;

/// Bytes of MR `big`, which the messages seeded from captures write and read:
/// four path MTUs, a whole seed message (see [`corpus::MAX_PACKETS`]).
const BIG_SIZE: u32 = 4096;
/// The longest a probe waits for its answers, and the quiet gap after which it
/// has had them: rxe under TCG answers a probe within 1–7 ms (measured in the
/// lab with a busy host: 0.65–6.33 ms; in the switch's recordings of 212 fuzz
/// batches, 635 of 643 answers to requests within 2 ms and none of a responder
/// batch's later than 2.5 ms), so b quiet for 10 ms has answered.
const SETTLE_MS: u32 = 50;
const QUIET_MS: u32 = 10;

/// One crafted request of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeGen {
    pub(crate) id: String,
    pub(crate) target: Target,
    pub(crate) opcode: Opcode,
    /// What was changed, in the order it was: `[Plain]` for a well-formed request.
    pub(crate) classes: Vec<Class>,
    /// The request: what it is when well formed, and each change.
    req: Request,
    /// The answer the specification gives whatever the device: none at all.
    pub(crate) silent: Option<&'static str>,
}

/// A probe's request: the well-formed values, and each class's change kept
/// apart from them, so that a change can be undone ([`ProbeGen::without`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Request {
    /// It has a RETH or an AtomicETH: a remote MR, an offset.
    remote: bool,
    cmp_swap: bool,
    mr: &'static str,
    offset: u64,
    len: u32,
    /// The payload's byte, drawn when the request has a payload.
    byte: Option<u8>,
    /// The RETH DMA length a well-formed request has when it is not the
    /// payload's length: a message's First, a READ (seeds from captures).
    dma: Option<u32>,
    /// BTH AckReq and SE as captured (a drawn request: set, clear).
    ack_req: bool,
    solicited: bool,
    /// Where the message it is part of came from: `captures/…` (seeds only).
    seed: Option<u32>,
    psn: Option<Psn>,
    rkey: Option<u32>,
    bounds: Option<u64>,
    dma_len: Option<u32>,
    length: Option<u32>,
    pad: Option<u64>,
    tver: Option<u64>,
    bad_icrc: bool,
    /// `Bits`: AckReq set or clear, and SE set.
    bits: Option<bool>,
    p_key: Option<u16>,
    dest_qp: Option<u32>,
    q_key: Option<u32>,
    /// `Atomic`: an offset (misaligned, or not) and the operands.
    atomic: Option<(Option<u64>, u64, u64)>,
}

/// A probe's PSN when it is not the one the QP expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Psn {
    /// That many after the next (before it, when negative): `"next+3"`.
    Next(i64),
    /// This one.
    At(u32),
}

impl Psn {
    /// As a probe's `psn` says it: `"next-2"`, or the PSN.
    fn value(self) -> Value {
        match self {
            Psn::Next(n) => Value::from(format!("next{n:+}")),
            Psn::At(psn) => int(psn),
        }
    }
}

impl Request {
    /// A well-formed request of opcode `info`, nothing changed: a remote
    /// address (RETH or AtomicETH) at `offset` into `mr` when `remote`.
    fn well_formed(
        info: &OpInfo,
        remote: bool,
        mr: &'static str,
        offset: u64,
        len: u32,
    ) -> Request {
        Request {
            remote,
            cmp_swap: info.name.starts_with("CmpSwap"),
            mr,
            offset,
            len,
            byte: None,
            dma: None,
            ack_req: true,
            solicited: false,
            seed: None,
            psn: None,
            rkey: None,
            bounds: None,
            dma_len: None,
            length: None,
            pad: None,
            tver: None,
            bad_icrc: false,
            bits: None,
            p_key: None,
            dest_qp: None,
            q_key: None,
            atomic: None,
        }
    }

    /// Bytes of the MR the request names: a bounds change is past its end.
    fn mr_size(&self) -> u64 {
        if self.mr == "big" {
            u64::from(BIG_SIZE)
        } else {
            MR_SIZE
        }
    }

    /// The payload's length, changed or not.
    fn payload_len(&self) -> u32 {
        self.length.unwrap_or(self.len)
    }

    /// Undoes the change of class `c`: what it was (`None` for a class that
    /// changes no field of the request).
    fn undo(&mut self, c: Class) -> Option<String> {
        fn take<T: std::fmt::Debug>(v: &mut Option<T>) -> String {
            format!("{:?}", v.take())
        }
        Some(match c {
            Class::Psn => take(&mut self.psn),
            Class::Rkey => take(&mut self.rkey),
            Class::Bounds => take(&mut self.bounds),
            Class::DmaLen => take(&mut self.dma_len),
            Class::Length => take(&mut self.length),
            Class::PadCnt => take(&mut self.pad),
            Class::TVer => take(&mut self.tver),
            Class::PKey => take(&mut self.p_key),
            Class::DestQp => take(&mut self.dest_qp),
            Class::Icrc => std::mem::take(&mut self.bad_icrc).to_string(),
            Class::Bits => take(&mut self.bits),
            Class::QKey => take(&mut self.q_key),
            Class::Atomic => take(&mut self.atomic),
            _ => return None,
        })
    }
}

impl ProbeGen {
    /// Probe `p{i}`: request `r` of opcode `info` at `target` with the changes
    /// `classes` (none: `[Plain]`), its payload's byte drawn, IBA's silence
    /// stated where IBA fixes it.
    fn finish(
        rng: &mut Rng,
        i: usize,
        target: Target,
        info: &OpInfo,
        mut classes: Vec<Class>,
        mut req: Request,
    ) -> ProbeGen {
        if classes.is_empty() {
            classes.push(Class::Plain);
        }
        if info.headers.contains(Headers::PAYLOAD) && req.payload_len() > 0 {
            req.byte = Some((rng.next_u64() as u8) | 1);
        }
        let mut p = ProbeGen {
            id: format!("p{i}"),
            target,
            opcode: info.opcode,
            classes,
            req,
            silent: None,
        };
        p.silent = p.silent_answer();
        p
    }

    /// The probe's inline table (`probe = { id = …, opcode = …, … }`), its
    /// keys in order.
    fn fields(&self) -> InlineTable {
        let r = &self.req;
        let mut f = InlineTable::new();
        f.insert("id", Value::from(self.id.as_str()));
        f.insert("opcode", Value::from(self.opcode.to_string()));
        if let Some(p) = r.psn {
            f.insert("psn", p.value());
        } else if self.dropped_unread().is_some() {
            // Sent at `next`, which would move on past a PSN the target
            // never took: every later probe would be out of sequence.
            f.insert("moves_next", Value::from(false));
        }
        if r.remote {
            // The offset the later of two changes that move it says.
            let mut offset = r.offset;
            for c in &self.classes {
                match (c, r.bounds, r.atomic) {
                    (Class::Bounds, Some(o), _) | (Class::Atomic, _, Some((Some(o), _, _))) => {
                        offset = o
                    }
                    _ => {}
                }
            }
            let mut remote = InlineTable::new();
            remote.insert("mr", Value::from(r.mr));
            remote.insert("offset", int(offset));
            if let Some(k) = r.rkey {
                remote.insert("rkey", hex(k, 1));
            }
            f.insert("remote", Value::from(remote));
        }
        if let Some(d) = r.dma_len.or(r.dma) {
            f.insert("dma_len", int(d));
        }
        if let (Some(byte), len @ 1..) = (r.byte, r.payload_len()) {
            let mut payload = InlineTable::new();
            payload.insert("pattern", Value::from(format!("{byte:02x}")));
            f.insert("payload", Value::from(payload));
            f.insert("len", int(len));
        }
        if let Some((_, compare, swap_add)) = r.atomic {
            f.insert("compare", int(compare));
            f.insert(if r.cmp_swap { "swap" } else { "add" }, int(swap_add));
        }
        if let Some(p) = r.pad {
            f.insert("pad", int(p));
        }
        if let Some(t) = r.tver {
            f.insert("tver", int(t));
        }
        if r.bad_icrc {
            f.insert("bad_icrc", Value::from(true));
        }
        match r.bits {
            Some(a) => {
                f.insert("ack_req", Value::from(a));
                f.insert("solicited", Value::from(true));
            }
            None => {
                if !r.ack_req {
                    f.insert("ack_req", Value::from(false));
                }
                if r.solicited {
                    f.insert("solicited", Value::from(true));
                }
            }
        }
        if let Some(p) = r.p_key {
            f.insert("p_key", hex(p, 4));
        }
        if let Some(q) = r.dest_qp {
            f.insert("dest_qp", hex(q, 1));
        }
        if let Some(q) = r.q_key {
            f.insert("q_key", hex(q, 1));
        }
        // Its answers come before the next probe goes (the judge gives a probe
        // what answers until the prober's next request).
        f.insert("settle_ms", int(SETTLE_MS));
        f.insert("quiet_ms", int(QUIET_MS));
        f
    }

    /// Its step: a sends the request to its QP.
    fn step(&self) -> Table {
        let mut t = Table::new();
        t.insert("on", toml_edit::value("a"));
        t.insert("op", toml_edit::value("probe"));
        t.insert("qp", toml_edit::value(self.target.qp()));
        t.insert("probe", toml_edit::value(self.fields()));
        t
    }

    /// What IBA says of the request whatever the rest: dropped without an answer.
    fn silent_answer(&self) -> Option<&'static str> {
        if let Some(why) = self.dropped_unread() {
            Some(why)
        } else if self.target == Target::RcErr {
            Some("a QP in the error state answers nothing (IBA 10.3.1)")
        } else if self.target == Target::Ud {
            Some("UD is unacknowledged: nothing answers a datagram (IBA 9.2)")
        } else if self.target == Target::Uc {
            Some("UC is unacknowledged: nothing answers a request (IBA 9.2)")
        } else {
            None
        }
    }

    /// Why the target's packet checks drop the probe before its QP reads it
    /// (IBA's packet header validation), if they do: the QP's expected PSN
    /// then stays where it was, so the prober's `next` must not move either.
    fn dropped_unread(&self) -> Option<&'static str> {
        let r = &self.req;
        if r.bad_icrc {
            Some("a packet with a bad ICRC is dropped silently (IBA 9.8.3.1, C9-41)")
        } else if r.tver.is_some() {
            Some("a packet with a TVer other than 0 is dropped silently (IBA 9.6.1.1)")
        } else if r.p_key.is_some_and(|k| k & 0x7fff != 0x7fff) {
            Some("a packet with a P_Key of another partition is dropped silently (IBA 9.6.1.1, 10.9.3)")
        } else if r.dest_qp.is_some() {
            Some("a packet for a QP that does not exist is dropped silently (IBA 9.6.1.1)")
        } else {
            None
        }
    }

    /// What the change of class `c` made the request: equal for equal changes.
    fn change(&self, c: Class) -> Option<String> {
        self.req.clone().undo(c)
    }

    /// This probe makes every change `other` makes, alike, to the same request
    /// (opcode, QP, MR): whatever `other` sets off, this one does too.
    pub(crate) fn repeats(&self, other: &ProbeGen) -> bool {
        self.opcode == other.opcode
            && self.target == other.target
            && self.req.mr == other.req.mr
            && other.classes.iter().all(|&c| {
                c == Class::Plain
                    || (self.classes.contains(&c) && self.change(c) == other.change(c))
            })
    }

    /// The changes that can be undone one at a time: every one but an opcode
    /// of another transport (the rest of the request was built for it).
    pub(crate) fn undoable(&self) -> Vec<Class> {
        if self.classes.contains(&Class::Foreign) {
            return Vec::new();
        }
        self.classes.iter().copied().filter(|c| *c != Class::Plain).collect()
    }

    /// The probe with the change of class `c` undone: that field as a
    /// well-formed request has it (the second stage of minimisation).
    pub(crate) fn without(&self, c: Class) -> ProbeGen {
        let mut p = self.clone();
        if p.req.undo(c).is_none() {
            return p;
        }
        p.classes.retain(|x| *x != c);
        if p.classes.is_empty() {
            p.classes.push(Class::Plain);
        }
        p.silent = p.silent_answer();
        p
    }

    /// Its coverage cells: one per class of change; an opcode of another
    /// transport is one cell whatever else changed.
    pub(crate) fn cells(&self) -> Vec<Cell> {
        if self.classes.contains(&Class::Foreign) {
            return vec![(self.opcode, Class::Foreign, self.target)];
        }
        self.classes.iter().map(|&c| (self.opcode, c, self.target)).collect()
    }

    /// `UC RDMA WRITE Only [rkey, psn] at uc`; a packet of a message seeded
    /// from a capture says which: `… at rc (captured message 12)`.
    pub(crate) fn describe(&self) -> String {
        let classes: Vec<&str> = self.classes.iter().map(|c| c.name()).collect();
        let seed = self.req.seed.map(|m| format!(" (captured message {m})")).unwrap_or_default();
        format!("{} [{}] at {}{seed}", self.opcode, classes.join(", "), self.target.qp())
    }
}

/// A fault planted in every batch, for the tests that show an oracle catches
/// what it is for (`roce fuzz --plant`, hidden): a switch rule, so the finding's
/// scenario carries it and reproduces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plant {
    /// The switch answers every request to `rc_err` (a QP in ERR) with an ACK.
    Protocol,
    /// The switch drops every frame a sends on `fresh`: the liveness WRITE never
    /// completes.
    Liveness,
}

impl Plant {
    /// Its `[[fault]]` rule: a fixture.
    fn fault(self) -> &'static str {
        match self {
            Plant::Protocol => include_str!("fixtures/plant-protocol.toml"),
            Plant::Liveness => include_str!("fixtures/plant-liveness.toml"),
        }
    }
}

/// A batch: the probes of one scenario run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Batch {
    pub(crate) seed: u64,
    pub(crate) index: u64,
    /// A responder batch's crafted requests (none in a requester batch).
    pub(crate) probes: Vec<ProbeGen>,
    /// A requester batch: a's operations and the switch's rules.
    pub(crate) requester: Option<super::requester::RequesterBatch>,
    pub(crate) plant: Option<Plant>,
    /// Drawn from an earlier batch that reached new rxe code (guidance): that
    /// batch's index.
    pub(crate) parent: Option<u64>,
}

/// The request opcodes of `t` that a probe can build (every one the table knows
/// for it).
fn requests(t: Transport) -> Vec<&'static OpInfo> {
    Opcode::all().filter(|i| i.transport == t && i.is_request()).collect()
}

fn chance(rng: &mut Rng, p: f64) -> bool {
    rng.next_f64() < p
}

impl Batch {
    /// Batch `index` of the run seeded `seed`: every third a requester batch,
    /// the others responder batches of `n` probes.
    #[cfg(test)]
    pub(crate) fn generate(seed: u64, index: u64, n: usize) -> Batch {
        Self::generate_from(seed, index, n, &Corpus::default())
    }

    /// The same, a responder batch's probes drawn from the catalogue of
    /// opcodes or, one draw in four, a message of `corpus` (its packets in
    /// order, at most one of them changed). An empty corpus draws exactly what
    /// [`Batch::generate`] does.
    pub(crate) fn generate_from(seed: u64, index: u64, n: usize, corpus: &Corpus) -> Batch {
        // One stream per batch, from both numbers: batch 7 is the same whatever
        // ran before it.
        let mut rng = Rng::new(seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407));
        if index % 3 == 2 {
            let r = super::requester::RequesterBatch::generate(&mut rng, n / 4);
            return Batch {
                seed,
                index,
                probes: Vec::new(),
                requester: Some(r),
                plant: None,
                parent: None,
            };
        }
        let mut probes = Vec::with_capacity(n);
        while probes.len() < n {
            if !corpus.is_empty() && chance(&mut rng, 0.25) {
                let at = (rng.next_u64() % corpus.messages.len() as u64) as usize;
                let room = n - probes.len();
                let first = probes.len();
                probes.extend(Self::message(&mut rng, &corpus.messages[at], at, first, room));
            } else {
                probes.push(Self::probe(&mut rng, probes.len()));
            }
        }
        Batch { seed, index, probes, requester: None, plant: None, parent: None }
    }

    /// Batch `index`, drawn from this one (which reached rxe code no batch
    /// before it had) by `rng`: one to three of its probes drawn again or given
    /// one more change, the rest as they were; of a requester batch, one rule
    /// drawn again or one more rule.
    pub(crate) fn mutate(&self, rng: &mut Rng, index: u64) -> Batch {
        let mut child = Batch { index, parent: Some(self.index), ..self.clone() };
        if let Some(r) = &mut child.requester {
            r.mutate(rng);
            return child;
        }
        if child.probes.is_empty() {
            return child;
        }
        for _ in 0..1 + rng.next_u64() % 3 {
            let i = (rng.next_u64() % child.probes.len() as u64) as usize;
            let p = &child.probes[i];
            let info = p.opcode.info().filter(|_| chance(rng, 0.5));
            child.probes[i] = match info {
                // One more change, of a class it does not have yet.
                Some(info) => {
                    let (target, mut req) = (p.target, p.req.clone());
                    let mut classes: Vec<Class> =
                        p.classes.iter().copied().filter(|c| *c != Class::Plain).collect();
                    let had = classes.len();
                    Self::draw_changes(rng, &mut req, &mut classes, info, target, 1);
                    if classes.len() == had {
                        continue;
                    }
                    ProbeGen::finish(rng, i, target, info, classes, req)
                }
                None => Self::probe(rng, i),
            };
        }
        child
    }

    /// The packets of captured message `m` (number `at` of the corpus), as
    /// probes `p{first}`… (at most `room` of them) to a QP of its transport:
    /// the lengths and header bits as captured (payloads within the lab's path
    /// MTU), a RETH at MR `big`; one packet in two gets a change.
    fn message(rng: &mut Rng, m: &Message, at: usize, first: usize, room: usize) -> Vec<ProbeGen> {
        let target = match m.transport() {
            Some(Transport::Uc) => Target::Uc,
            Some(Transport::Ud) => Target::Ud,
            _ => pick(rng, &[Target::Rc, Target::Rc, Target::Rc, Target::RcErr]),
        };
        let packets: Vec<&corpus::Packet> = m.packets.iter().take(room).collect();
        let lens: Vec<u32> = packets.iter().map(|p| p.len.min(PMTU)).collect();
        let total: u32 = lens.iter().sum();
        let changed = chance(rng, 0.5).then(|| (rng.next_u64() % packets.len() as u64) as usize);
        let mut out = Vec::new();
        for (k, (p, &len)) in packets.iter().zip(&lens).enumerate() {
            let Some(info) = p.opcode.info() else { continue };
            let h = info.headers;
            let read = info.is(Kind::READ);
            let atomic = h.contains(Headers::ATOMICETH);
            // An atomic at `target`, the MR that allows them (offset 0: aligned).
            let mr = if atomic { "target" } else { "big" };
            let len = if h.contains(Headers::PAYLOAD) { len } else { 0 };
            let mut r = Request::well_formed(info, h.contains(Headers::RETH) || atomic, mr, 0, len);
            r.dma = match (h.contains(Headers::RETH), read) {
                (false, _) => None,
                (true, true) => Some(p.reth.unwrap_or(0).min(BIG_SIZE)),
                (true, false) => Some(total),
            };
            (r.ack_req, r.solicited, r.seed) = (p.ack_req, p.solicited, Some(at as u32));
            let mut classes = Vec::new();
            if changed == Some(k) {
                Self::draw_changes(rng, &mut r, &mut classes, info, target, 1);
            }
            out.push(ProbeGen::finish(rng, first + out.len(), target, info, classes, r));
        }
        out
    }

    /// What a minimisation chooses from: probes, or a requester batch's rules
    /// and operations.
    pub(crate) fn items(&self) -> usize {
        match &self.requester {
            Some(r) => r.items(),
            None => self.probes.len(),
        }
    }

    /// Item `i` repeats item `j` of `other`: the same operation or switch
    /// rule, or a probe with the same request and at least the same changes.
    pub(crate) fn repeats(&self, i: usize, other: &Batch, j: usize) -> bool {
        match (self.probes.get(i), other.probes.get(j)) {
            (Some(p), Some(q)) => p.repeats(q),
            (None, None) => self.describe(i) == other.describe(j),
            _ => false,
        }
    }

    /// Table `t` of the batch's scenario with the items `keep` (at `path`:
    /// `step`, `expect.probe`) is one the items are: a probe's step and what IBA
    /// answers it, a switch rule, a requester operation's step and expectations.
    /// Setup minimisation never leaves those out.
    pub(crate) fn about(&self, keep: &[usize], path: &str, t: &Table) -> bool {
        match &self.requester {
            Some(r) => r.about(keep, path, t),
            None => match path {
                "fault" | "expect.probe" => true,
                "step" => t.get("op").and_then(|o| o.as_str()) == Some("probe"),
                _ => false,
            },
        }
    }

    /// Item `i`, in words.
    pub(crate) fn describe(&self, i: usize) -> String {
        match &self.requester {
            Some(r) => r.describe(i),
            None => self.probes.get(i).map(ProbeGen::describe).unwrap_or_default(),
        }
    }

    pub(super) fn probe(rng: &mut Rng, i: usize) -> ProbeGen {
        let target =
            pick(rng, &[Target::Rc, Target::Rc, Target::Rc, Target::Uc, Target::Ud, Target::RcErr]);
        let own = requests(target.transport());
        let mut info = pick(rng, &own);
        let mut classes = Vec::new();
        if chance(rng, 0.08) {
            // An opcode the QP's transport does not have (RC's on UC, …).
            info = pick(rng, &foreign(target));
            classes.push(Class::Foreign);
        }
        let h = info.headers;
        let atomic = h.contains(Headers::ATOMICETH);
        let len: u32 = if h.contains(Headers::PAYLOAD) {
            if info.is(Kind::ATOMIC) {
                8
            } else {
                pick(rng, &[0u32, 1, 8, 16, 32, 64])
            }
        } else {
            0
        };
        // The request as it should be.
        let offset = if atomic {
            8 * (rng.next_u64() % (MR_SIZE / 8))
        } else {
            rng.next_u64() % (MR_SIZE - u64::from(len.min(MR_SIZE as u32)) + 1)
        };
        let mut r =
            Request::well_formed(info, h.contains(Headers::RETH) || atomic, "target", offset, len);
        if r.remote {
            // One in five at the MR that allows no remote access at all.
            if chance(rng, 0.2) {
                r.mr = "locked";
            }
        }
        // Then up to two changes.
        let changes = pick(rng, &[0usize, 1, 1, 1, 2, 2]);
        Self::draw_changes(rng, &mut r, &mut classes, info, target, changes);
        ProbeGen::finish(rng, i, target, info, classes, r)
    }

    /// Makes up to `changes` changes to `r`, each of a class that applies to the
    /// opcode at the target, none twice.
    fn draw_changes(
        rng: &mut Rng,
        r: &mut Request,
        classes: &mut Vec<Class>,
        info: &OpInfo,
        target: Target,
        changes: usize,
    ) {
        let candidates: Vec<Class> = Class::ALL[1..]
            .iter()
            .copied()
            .filter(|c| *c != Class::Foreign && c.applies(info, target))
            .collect();
        for _ in 0..changes {
            let c = pick(rng, &candidates);
            if classes.contains(&c) {
                continue;
            }
            classes.push(c);
            match c {
                Class::Psn => {
                    r.psn = Some(match rng.next_u64() % 4 {
                        0 => Psn::Next(-1 - (rng.next_u64() % 3) as i64),
                        1 => Psn::Next(1 + (rng.next_u64() % 4) as i64),
                        2 => Psn::Next(1000 + (rng.next_u64() % 100_000) as i64),
                        _ => Psn::At(rng.next_u64() as u32 & 0xff_ffff),
                    })
                }
                Class::Rkey => r.rkey = Some(rng.next_u64() as u32 | 0x8000_0000),
                Class::Bounds => {
                    r.bounds = Some(match rng.next_u64() % 3 {
                        // Straddling the end (from 0 when the payload is
                        // over twice the MR).
                        0 => r.mr_size().saturating_sub(u64::from(r.payload_len().max(1)) / 2),
                        1 => r.mr_size() + rng.next_u64() % 16,
                        _ => 1 << (12 + rng.next_u64() % 20),
                    });
                }
                Class::DmaLen => {
                    r.dma_len = Some(match rng.next_u64() % 3 {
                        0 => 0,
                        1 => r.payload_len() + 1 + (rng.next_u64() % 64) as u32,
                        _ => 0x8000_0000,
                    })
                }
                // Past the QPs' path MTU (1024), within the lab's link (a
                // 1500-byte IP MTU leaves a RoCE payload of at most 1428).
                Class::Length => r.length = Some(pick(rng, &[1025u32, 1280, 1408])),
                Class::PadCnt => r.pad = Some(1 + rng.next_u64() % 3),
                Class::TVer => r.tver = Some(1 + rng.next_u64() % 15),
                Class::PKey => r.p_key = Some(pick(rng, &[0x8123u16, 0x0000, 0x7fff, 0x1234])),
                Class::DestQp => r.dest_qp = Some(0x80_0000 | (rng.next_u64() as u32 & 0x7f_ffff)),
                Class::Icrc => r.bad_icrc = true,
                Class::Bits => r.bits = Some(chance(rng, 0.5)),
                Class::QKey => {
                    r.q_key = Some(pick(rng, &[0x2222_2222u32, 0x8000_0000, 0x9111_1111, 0]))
                }
                Class::Atomic => {
                    let misaligned =
                        chance(rng, 0.5).then(|| 4 + 8 * (rng.next_u64() % (MR_SIZE / 8 - 1)));
                    // 63 bits: a TOML integer is signed.
                    let compare = rng.next_u64() >> 1;
                    r.atomic = Some((misaligned, compare, rng.next_u64() >> 1));
                }
                Class::Plain
                | Class::Foreign
                | Class::Drop
                | Class::Dup
                | Class::Delay
                | Class::Corrupt
                | Class::Synth
                | Class::Ieth => {}
            }
        }
    }

    /// `Drawn by roce fuzz --seed 7: batch 12`, and from which batch when it
    /// was drawn from one (guided runs draw on what the kernel reached, so
    /// only the file reproduces it).
    fn drawn(&self) -> String {
        let by = format!("Drawn by `roce fuzz --seed {}`", self.seed);
        match self.parent {
            Some(p) => {
                format!("{by}, guided by rxe coverage: batch {}, from batch {p}", self.index)
            }
            None => format!("{by}: batch {}", self.index),
        }
    }

    /// The batch as a scenario file, with only the probes `keep` (indices into
    /// `probes`, in order), under a header of comments: `title`, the seed and
    /// batch, each item kept. Every batch has the same setup and the same
    /// oracles (fixtures; the probes' steps and expectations are built):
    ///
    /// - MR `target` on b allows every remote access; MR `locked` allows none, so
    ///   no request may change it (`unchanged = true`); nothing outside either,
    ///   nor outside b's receive buffer, may change (`outside = "unchanged"`);
    /// - a probe whose answer IBA fixes whatever the device gets it as an
    ///   `[[expect.probe]]`: no answer;
    /// - after the probes, a WRITE from a on a fresh RC QP lands and completes
    ///   (`[[expect.completion]]`, `[[expect.memory]]`): the device still works.
    pub(crate) fn toml(&self, keep: &[usize], title: &str) -> String {
        let name = format!("fuzz: seed {} batch {}", self.seed, self.index);
        if let Some(r) = &self.requester {
            let mut header = vec![
                title.to_string(),
                format!("{} (requester), items kept: {:?}.", self.drawn(), keep),
            ];
            header.extend(keep.iter().map(|&i| format!("  {i}: {}", r.describe(i))));
            let mut doc = Doc::new(header);
            doc.set("name", name);
            r.write(keep, &mut doc);
            doc.bound_completions();
            return doc.to_string();
        }
        let kept: Vec<&ProbeGen> = keep.iter().filter_map(|&i| self.probes.get(i)).collect();
        let mut header = vec![
            title.to_string(),
            format!(
                "{}, probes {}.",
                self.drawn(),
                kept.iter().map(|p| p.id.as_str()).collect::<Vec<_>>().join(" ")
            ),
        ];
        header.extend(kept.iter().map(|p| format!("  {}: {}", p.id, p.describe())));
        let mut doc = Doc::new(header);
        doc.set("name", name);
        doc.fixture(SETUP);
        let big = kept.iter().any(|p| p.req.mr == "big");
        if big {
            doc.fixture(BIG);
        }
        doc.fixture(LIVENESS_OBJECTS);
        for p in &kept {
            doc.push(&["step"], p.step(), None);
        }
        doc.fixture(LIVENESS);
        doc.fixture(MEMORY);
        if big {
            doc.fixture(BIG_MEMORY);
        }
        if let Some(p) = self.plant {
            doc.fixture(p.fault());
        }
        for p in &kept {
            if let Some(why) = p.silent {
                let mut t = Table::new();
                t.insert("probe", toml_edit::value(p.id.as_str()));
                t.insert("responses", toml_edit::value(Array::new()));
                doc.push(&["expect", "probe"], t, Some(why));
            }
        }
        doc.bound_completions();
        doc.to_string()
    }

    /// Its coverage cells.
    pub(crate) fn cells(&self) -> BTreeSet<Cell> {
        if let Some(r) = &self.requester {
            return r.cells().into_iter().collect();
        }
        self.probes.iter().flat_map(|p| p.cells()).collect()
    }
}

/// Every cell a run could reach: each target's own request opcodes with each
/// class that applies to them, plus every other transport's request opcodes
/// once per target.
pub(crate) fn all_cells() -> BTreeSet<Cell> {
    let mut all = BTreeSet::new();
    for t in Target::ALL {
        for info in requests(t.transport()) {
            for c in Class::ALL.iter().filter(|c| **c != Class::Foreign && c.applies(info, t)) {
                all.insert((info.opcode, *c, t));
            }
        }
        for info in foreign(t) {
            all.insert((info.opcode, Class::Foreign, t));
        }
    }
    all.extend(super::requester::all_cells());
    all
}

/// The request opcodes of the transports other than `t`'s.
fn foreign(t: Target) -> Vec<&'static OpInfo> {
    [Transport::Rc, Transport::Uc, Transport::Ud, Transport::Xrc]
        .into_iter()
        .filter(|x| *x != t.transport())
        .flat_map(requests)
        .collect()
}

/// The QPs, MRs and receives every responder batch starts from.
const SETUP: &str = include_str!("fixtures/responder-setup.toml");

/// MR `big` on b, for the messages seeded from captures ([`BIG_SIZE`] bytes).
const BIG: &str = include_str!("fixtures/responder-big.toml");

/// The memory oracle of MR `big`.
const BIG_MEMORY: &str = include_str!("fixtures/responder-big-memory.toml");

/// The memory oracles every responder batch ends with.
const MEMORY: &str = include_str!("fixtures/responder-memory.toml");

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_batch_is_drawn_from_its_seed_and_index_alone() {
        assert_eq!(Batch::generate(7, 3, 12), Batch::generate(7, 3, 12));
        assert_ne!(Batch::generate(7, 3, 12), Batch::generate(7, 4, 12));
        assert_ne!(Batch::generate(7, 3, 12), Batch::generate(8, 3, 12));
        // And so is its file, byte for byte, of either kind.
        for index in 0..6 {
            let text = |b: Batch| b.toml(&(0..b.items()).collect::<Vec<_>>(), "t");
            assert_eq!(text(Batch::generate(7, index, 12)), text(Batch::generate(7, index, 12)));
        }
    }

    /// The warning every batch loads with: it names no rule of the conformance
    /// catalogue (a batch checks what IBA fixes of whatever it drew).
    const NO_SPEC: &str = "the scenario names no rule of the conformance catalogue";

    /// Loads `text` as a scenario: no error, no warning but [`NO_SPEC`].
    pub(crate) fn load(text: &str) -> crate::scenario::model::Scenario {
        let sc = crate::scenario::check::parse_str(Path::new("fuzz.toml"), text)
            .unwrap_or_else(|e| panic!("{}\n{text}", e[0]));
        let warnings: Vec<&str> =
            sc.warnings.iter().map(|w| w.message.as_str()).filter(|m| *m != NO_SPEC).collect();
        assert!(warnings.is_empty(), "{warnings:?}\n{text}");
        sc
    }

    /// For several seeds, every batch of either kind loads, with every item and
    /// with a few, its fixtures and drawn tables in their places.
    #[test]
    fn every_batch_of_either_kind_loads_without_warnings() {
        let (mut responders, mut requesters) = (0, 0);
        for seed in [0, 1, 7, 42, 1234] {
            for index in 0..9 {
                let b = Batch::generate(seed, index, 16);
                let all: Vec<usize> = (0..b.items()).collect();
                for keep in [all.clone(), all.iter().copied().step_by(2).collect()] {
                    let sc = load(&b.toml(&keep, "t"));
                    assert_eq!(sc.name, format!("fuzz: seed {seed} batch {index}"));
                    // The liveness WRITE comes last, on its fresh QP.
                    let last = sc.steps.last().and_then(|s| s.action());
                    assert!(matches!(last, Some(crate::protocol::Action::Post { .. })), "{last:?}");
                    assert!(sc.qps.iter().any(|q| q.name == "fresh"));
                    assert!(sc.expect.completion.iter().any(|c| c.wr_id == Some(99)));
                }
                match b.requester {
                    Some(_) => requesters += 1,
                    None => responders += 1,
                }
            }
        }
        assert!(responders > 0 && requesters > 0, "{responders} {requesters}");
    }

    /// What the fixtures hold agrees with what the generator assumes of them:
    /// the MRs' sizes, the QPs it aims at.
    #[test]
    fn the_fixtures_are_what_the_generator_aims_at() {
        let setup: toml::Table = toml::from_str(SETUP).expect("TOML");
        let size = |t: &toml::Table, name: &str| {
            t["mr"].as_array().and_then(|mrs| {
                mrs.iter().find(|m| m["name"].as_str() == Some(name))?["size"].as_integer()
            })
        };
        assert_eq!(size(&setup, "target"), Some(MR_SIZE as i64));
        assert_eq!(size(&setup, "locked"), Some(MR_SIZE as i64));
        let big: toml::Table = toml::from_str(BIG).expect("TOML");
        assert_eq!(size(&big, "big"), Some(i64::from(BIG_SIZE)));
        let qps: Vec<&str> = setup["qp"]
            .as_array()
            .map(|q| q.iter().filter_map(|q| q["name"].as_str()).collect())
            .unwrap_or_default();
        for t in Target::ALL {
            assert!(qps.contains(&t.qp()), "{t:?}");
        }
    }

    /// Batches seeded from the project's captures send captured messages
    /// whole and in order, to a QP of their transport, with a RETH at `big`
    /// (which the file then has), and load as scenarios.
    #[test]
    fn batches_seeded_from_captures_send_whole_messages_and_load() {
        let corpus = Corpus::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../captures"))
            .expect("captures/");
        let (mut seeded, mut bounds) = (0, 0);
        for i in 0..120 {
            let b = Batch::generate_from(21, i, 16, &corpus);
            let all: Vec<usize> = (0..b.items()).collect();
            let text = b.toml(&all, "test");
            let sc = load(&text);
            assert_eq!(b.probes.len(), if b.requester.is_some() { 0 } else { 16 });
            for p in b.probes.iter().filter(|p| p.req.seed.is_some()) {
                seeded += 1;
                let m = &corpus.messages[p.req.seed.unwrap_or_default() as usize];
                assert!(m.packets.iter().any(|c| c.opcode == p.opcode), "{}", p.describe());
                assert!(p.describe().contains("(captured message"), "{}", p.describe());
                if p.req.mr == "big" {
                    assert!(sc.mrs.iter().any(|m| m.name == "big"), "{text}");
                    // A bounds change is at or past the end of `big` itself.
                    if let Some(o) = p.req.bounds {
                        assert!(o >= u64::from(BIG_SIZE - PMTU / 2), "{}: {o}", p.describe());
                        bounds += 1;
                    }
                }
            }
        }
        assert!(seeded > 100, "about one draw in four is a captured message: {seeded}");
        assert!(bounds > 0, "a seeded probe at `big` with a bounds change");
        // No corpus: what the catalogue alone draws.
        assert_eq!(Batch::generate_from(21, 4, 16, &Corpus::default()), Batch::generate(21, 4, 16));
    }

    /// Every batch of many seeds is a scenario `roce check` takes, whatever
    /// subset of its probes a minimisation keeps.
    #[test]
    fn every_batch_loads_and_so_does_every_subset() {
        // Many batches whole (a value out of TOML's range hid in one of
        // several hundred), a few of them cut down too.
        for seed in 60..900 {
            let b = Batch::generate(seed, seed / 7, 16);
            let all: Vec<usize> = (0..b.items()).collect();
            load(&b.toml(&all, "test"));
        }
        for seed in 0..60 {
            // Every third index is a requester batch: its items are rules,
            // then operations (each a step of a's).
            let b = Batch::generate(seed, seed, 16);
            let all: Vec<usize> = (0..b.items()).collect();
            for keep in [all.clone(), all.iter().copied().step_by(3).collect(), vec![]] {
                let text = b.toml(&keep, "test");
                let sc = load(&text);
                let probes = sc
                    .steps
                    .iter()
                    .filter(|s| matches!(s.action(), Some(crate::protocol::Action::Probe(_))))
                    .count();
                let a_ops = |sc: &crate::scenario::model::Scenario| {
                    sc.steps
                        .iter()
                        .filter(|s| {
                            matches!(s, crate::scenario::model::Step::Act { on, action: crate::protocol::Action::Post { .. } } if on == "a")
                        })
                        .count()
                };
                // The liveness WRITE is a's too, in every batch.
                let items =
                    if b.requester.is_some() { sc.faults.len() + a_ops(&sc) - 1 } else { probes };
                assert_eq!(items, keep.len());
            }
        }
        for plant in [Plant::Protocol, Plant::Liveness] {
            let b = Batch { plant: Some(plant), ..Batch::generate(3, 3, 4) };
            let sc = load(&b.toml(&[0, 1], "t"));
            assert_eq!(sc.faults.len(), 1, "{plant:?}");
        }
    }

    /// The least setup of a batch's items (what setup minimisation tries
    /// first) is a scenario that checks, with every item in it: each probe and
    /// what IBA answers it, each rule, each of a's operations and its
    /// expectations; a QP a probe aims at stays in the state the batch gave it.
    #[test]
    fn the_least_setup_of_every_batch_checks_and_keeps_its_items() {
        use crate::fuzz::setup::Setup;
        for seed in 0..90 {
            let b = Batch::generate(seed, seed, 16);
            let all: Vec<usize> = (0..b.items()).collect();
            for keep in [all.clone(), all.iter().copied().step_by(4).collect()] {
                let whole = load(&b.toml(&keep, "t"));
                let tables =
                    Setup::new(&b.toml(&keep, "t"), |p, t| b.about(&keep, p, t)).expect("TOML");
                let least = load(&tables.text(&[]));
                assert_eq!(least.faults.len(), whole.faults.len());
                let ops = |sc: &crate::scenario::model::Scenario| -> Vec<String> {
                    sc.steps
                        .iter()
                        .filter_map(|s| match s {
                            crate::scenario::model::Step::Act { on, action } if on == "a" => {
                                Some(format!("{action:?}"))
                            }
                            _ => None,
                        })
                        .filter(|a| !a.contains("wr_id: 99"))
                        .collect()
                };
                assert_eq!(ops(&least), ops(&whole), "seed {seed}");
                assert_eq!(least.expect.probe.len(), whole.expect.probe.len());
                let at_err = |sc: &crate::scenario::model::Scenario| {
                    sc.steps.iter().any(|s| format!("{s:?}").contains("ModifyQp"))
                };
                let aims_at_err = keep
                    .iter()
                    .any(|&i| b.probes.get(i).is_some_and(|p| p.target == Target::RcErr));
                assert_eq!(at_err(&least), aims_at_err, "seed {seed}");
                assert!(least.qps.len() <= whole.qps.len() && least.mrs.len() < whole.mrs.len());
                // All of it is the batch again.
                assert_eq!(load(&tables.text(&tables.candidates())).steps.len(), whole.steps.len());
            }
        }
    }

    /// A batch drawn from a kept one (guidance) is that batch with one to
    /// three probes drawn again or changed once more (a requester batch: one
    /// rule drawn again or one more), says whose it is, and loads.
    #[test]
    fn a_batch_drawn_from_a_kept_one_is_it_changed_a_little() {
        let mut changed = 0;
        for seed in 0..60 {
            let parent = Batch::generate(seed, seed, 16);
            let mut rng = Rng::new(seed);
            let child = parent.mutate(&mut rng, 1000 + seed);
            assert_eq!((child.index, child.parent), (1000 + seed, Some(parent.index)));
            let all: Vec<usize> = (0..child.items()).collect();
            let text = child.toml(&all, "t");
            load(&text);
            assert!(text.contains(&format!("from batch {}", parent.index)), "{text}");
            match (&parent.requester, &child.requester) {
                (Some(p), Some(c)) => {
                    assert_eq!(p.ops, c.ops);
                    assert!(
                        c.faults.len() == p.faults.len() || c.faults.len() == p.faults.len() + 1
                    );
                    assert!(c.faults.len() <= 4);
                }
                (None, None) => {
                    assert_eq!(child.probes.len(), parent.probes.len());
                    let ids = |b: &Batch| b.probes.iter().map(|p| p.id.clone()).collect::<Vec<_>>();
                    assert_eq!(ids(&child), ids(&parent));
                    let differ =
                        child.probes.iter().zip(&parent.probes).filter(|(c, p)| c != p).count();
                    assert!(differ <= 3, "{differ} probes changed");
                    changed += usize::from(differ > 0);
                }
                _ => panic!("a batch keeps its kind"),
            }
        }
        assert!(changed > 30, "most children differ from their parents: {changed}");
    }

    #[test]
    fn batches_reach_many_cells_and_only_known_ones() {
        let all = all_cells();
        let mut reached = BTreeSet::new();
        for i in 0..200 {
            reached.extend(Batch::generate(1, i, 16).cells());
        }
        assert!(reached.iter().all(|c| all.contains(c)), "{:?}", reached.difference(&all).next());
        let own = |s: &BTreeSet<Cell>| s.iter().filter(|c| c.1 != Class::Foreign).count();
        assert!(own(&reached) > own(&all) / 2, "{} of {}", own(&reached), own(&all));
        // Each target and each class is drawn.
        for t in Target::ALL {
            assert!(reached.iter().any(|c| c.2 == t), "{t:?}");
        }
        for c in Class::ALL {
            assert!(reached.iter().any(|x| x.1 == c), "{c:?}");
        }
    }

    /// A probe the target's header checks drop (bad ICRC, TVer, another
    /// partition, another QP) leaves the QP's expected PSN where it was: the
    /// prober's `next` stays too, so the probes after it are still in
    /// sequence (they drifted one ahead per such probe, and every later
    /// request drew a PSN sequence error NAK, then silence).
    #[test]
    fn a_probe_dropped_unread_does_not_move_next() {
        let mut dropped = 0;
        for seed in 0..40 {
            let b = Batch::generate(seed, 1 + seed * 3, 16);
            let all: Vec<usize> = (0..b.items()).collect();
            let sc = load(&b.toml(&all, "t"));
            let orders: Vec<&crate::protocol::ProbeOrder> = sc
                .steps
                .iter()
                .filter_map(|s| match s.action() {
                    Some(crate::protocol::Action::Probe(o)) => Some(o),
                    _ => None,
                })
                .collect();
            for (p, o) in b.probes.iter().zip(&orders) {
                assert_eq!(p.id, o.id);
                let unread = p.dropped_unread().is_some();
                let at_next = o.psn == crate::protocol::PsnAt::Next(0);
                assert_eq!(o.moves_next, at_next && !unread, "{}: {p:?}", o.id);
                dropped += usize::from(unread && at_next);
            }
        }
        assert!(dropped > 10, "only {dropped} probes dropped unread at next");
    }

    #[test]
    fn what_iba_fixes_becomes_an_expectation() {
        let b = (0..50)
            .map(|i| Batch::generate(5, i, 16))
            .find(|b| {
                b.probes.iter().any(|p| p.classes.contains(&Class::Icrc) && p.target == Target::Rc)
            })
            .expect("a bad ICRC at rc");
        let p = b
            .probes
            .iter()
            .find(|p| p.classes.contains(&Class::Icrc) && p.target == Target::Rc)
            .unwrap();
        assert!(p.silent.is_some_and(|w| w.contains("bad ICRC")));
        let i = b.probes.iter().position(|x| x == p).unwrap();
        let text = b.toml(&[i], "t");
        let sc = load(&text);
        let expected: Vec<(&str, Option<usize>)> = sc
            .expect
            .probe
            .iter()
            .map(|e| (e.probe.as_str(), e.responses.as_ref().map(Vec::len)))
            .collect();
        assert_eq!(expected, [(p.id.as_str(), Some(0))], "{text}");
        // With IBA's reason above it, one comment line.
        let why = format!("# {}\n[[expect.probe]]\n", p.silent.unwrap_or_default());
        assert!(text.contains(&why), "{text}");
        // A plain RC request: the device decides (no expectation).
        let plain = (0..50)
            .flat_map(|i| Batch::generate(6, i, 16).probes)
            .find(|p| p.classes == [Class::Plain] && p.target == Target::Rc)
            .expect("a plain RC probe");
        assert_eq!(plain.silent, None);
    }
}
