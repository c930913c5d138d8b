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
//! (see [`Batch::toml`]).
//!
//! Owns: the responder batch, its probes, the whole coverage space ([`all_cells`]).
//! Imports: `super::space`, `super::requester`, the dissector's opcode table, the lab's seeded RNG.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use dissector::wire::opcode::{Headers, Kind, OpInfo};
use dissector::wire::{Opcode, Transport};
use lab::fault::Rng;

use super::corpus::{self, Corpus, Message};
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
    psn: Option<String>,
    rkey: Option<String>,
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

    /// `key = value` pairs of the probe's inline table, in order.
    fn fields(&self) -> Vec<(&'static str, String)> {
        let r = &self.req;
        let mut f: Vec<(&'static str, String)> = Vec::new();
        f.push(("id", format!("\"{}\"", self.id)));
        f.push(("opcode", format!("\"{}\"", self.opcode)));
        if let Some(p) = &r.psn {
            f.push(("psn", p.clone()));
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
            let key = r.rkey.as_ref().map(|k| format!(", rkey = {k}")).unwrap_or_default();
            f.push(("remote", format!("{{ mr = \"{}\", offset = {offset}{key} }}", r.mr)));
        }
        if let Some(d) = r.dma_len.or(r.dma) {
            f.push(("dma_len", d.to_string()));
        }
        if let (Some(byte), len @ 1..) = (r.byte, r.payload_len()) {
            f.push(("payload", format!("{{ pattern = \"{byte:02x}\" }}")));
            f.push(("len", len.to_string()));
        }
        if let Some((_, compare, swap_add)) = r.atomic {
            f.push(("compare", compare.to_string()));
            f.push((if r.cmp_swap { "swap" } else { "add" }, swap_add.to_string()));
        }
        if let Some(p) = r.pad {
            f.push(("pad", p.to_string()));
        }
        if let Some(t) = r.tver {
            f.push(("tver", t.to_string()));
        }
        if r.bad_icrc {
            f.push(("bad_icrc", "true".into()));
        }
        match r.bits {
            Some(a) => {
                f.push(("ack_req", a.to_string()));
                f.push(("solicited", "true".into()));
            }
            None => {
                if !r.ack_req {
                    f.push(("ack_req", "false".into()));
                }
                if r.solicited {
                    f.push(("solicited", "true".into()));
                }
            }
        }
        if let Some(p) = r.p_key {
            f.push(("p_key", format!("{p:#06x}")));
        }
        if let Some(q) = r.dest_qp {
            f.push(("dest_qp", format!("{q:#x}")));
        }
        if let Some(q) = r.q_key {
            f.push(("q_key", format!("{q:#x}")));
        }
        // Long enough for its answers to come before the next probe goes (the
        // judge gives a probe what answers until the prober's next request).
        f.push(("settle_ms", "50".into()));
        f
    }

    /// What IBA says of the request whatever the rest: dropped without an answer.
    fn silent_answer(&self) -> Option<&'static str> {
        let r = &self.req;
        if r.bad_icrc {
            Some("a packet with a bad ICRC is dropped silently (IBA 9.8.3.1, C9-41)")
        } else if r.tver.is_some() {
            Some("a packet with a TVer other than 0 is dropped silently (IBA 9.6.1.1)")
        } else if r.p_key.is_some_and(|k| k & 0x7fff != 0x7fff) {
            Some("a packet with a P_Key of another partition is dropped silently (IBA 9.6.1.1, 10.9.3)")
        } else if r.dest_qp.is_some() {
            Some("a packet for a QP that does not exist is dropped silently (IBA 9.6.1.1)")
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
    fn fault(self) -> &'static str {
        match self {
            Plant::Protocol => "\n# Planted (roce fuzz --plant protocol): the switch answers for the QP in ERR.\n[[fault]]\nrule = \"respond with=ack\"\nfrom = \"a\"\nqp = \"rc_err\"\n",
            Plant::Liveness => "\n# Planted (roce fuzz --plant liveness): nothing a sends on `fresh` arrives.\n[[fault]]\nrule = \"drop\"\nfrom = \"a\"\nqp = \"fresh\"\n",
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
            return Batch { seed, index, probes: Vec::new(), requester: Some(r), plant: None };
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
        Batch { seed, index, probes, requester: None, plant: None }
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

    /// Item `i`, in words.
    pub(crate) fn describe(&self, i: usize) -> String {
        match &self.requester {
            Some(r) => r.describe(i),
            None => self.probes.get(i).map(ProbeGen::describe).unwrap_or_default(),
        }
    }

    fn probe(rng: &mut Rng, i: usize) -> ProbeGen {
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
                        0 => format!("\"next-{}\"", 1 + rng.next_u64() % 3),
                        1 => format!("\"next+{}\"", 1 + rng.next_u64() % 4),
                        2 => format!("\"next+{}\"", 1000 + rng.next_u64() % 100_000),
                        _ => format!("{}", rng.next_u64() & 0xff_ffff),
                    })
                }
                Class::Rkey => r.rkey = Some(format!("{:#x}", rng.next_u64() as u32 | 0x8000_0000)),
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

    /// The batch as a scenario file, with only the probes `keep` (indices into
    /// `probes`, in order). Every batch has the same setup and the same oracles:
    ///
    /// - MR `target` on b allows every remote access; MR `locked` allows none, so
    ///   no request may change it (`unchanged = true`); nothing outside either,
    ///   nor outside b's receive buffer, may change (`outside = "unchanged"`);
    /// - a probe whose answer IBA fixes whatever the device gets it as an
    ///   `[[expect.probe]]`: no answer;
    /// - after the probes, a WRITE from a on a fresh RC QP lands and completes
    ///   (`[[expect.completion]]`, `[[expect.memory]]`): the device still works.
    pub(crate) fn toml(&self, keep: &[usize], title: &str) -> String {
        let mut s = String::new();
        if let Some(r) = &self.requester {
            let _ = writeln!(s, "# {title}");
            let _ = writeln!(
                s,
                "# Drawn by `roce fuzz --seed {}`: batch {} (requester), items kept: {:?}.",
                self.seed, self.index, keep
            );
            for &i in keep {
                let _ = writeln!(s, "#   {i}: {}", r.describe(i));
            }
            return s + &r.toml(keep, &format!("fuzz: seed {} batch {}", self.seed, self.index));
        }
        let kept: Vec<&ProbeGen> = keep.iter().filter_map(|&i| self.probes.get(i)).collect();
        let _ = writeln!(s, "# {title}");
        let _ = writeln!(
            s,
            "# Drawn by `roce fuzz --seed {}`: batch {}, probes {}.",
            self.seed,
            self.index,
            kept.iter().map(|p| p.id.as_str()).collect::<Vec<_>>().join(" ")
        );
        for p in &kept {
            let _ = writeln!(s, "#   {}: {}", p.id, p.describe());
        }
        let _ = writeln!(s, "name = \"fuzz: seed {} batch {}\"", self.seed, self.index);
        s.push_str(SETUP);
        let big = kept.iter().any(|p| p.req.mr == "big");
        if big {
            s.push_str(BIG);
        }
        s.push_str(LIVENESS_OBJECTS);
        for p in &kept {
            let fields: Vec<String> =
                p.fields().iter().map(|(k, v)| format!("{k} = {v}")).collect();
            let _ = write!(
                s,
                "\n[[step]]\non = \"a\"\nop = \"probe\"\nqp = \"{}\"\nprobe = {{ {} }}\n",
                p.target.qp(),
                fields.join(", ")
            );
        }
        s.push_str(LIVENESS);
        s.push_str(MEMORY);
        if big {
            s.push_str(BIG_MEMORY);
        }
        if let Some(p) = self.plant {
            s.push_str(p.fault());
        }
        for p in kept.iter().filter(|p| p.silent.is_some()) {
            let why = p.silent.unwrap_or_default();
            let _ =
                write!(s, "\n# {why}\n[[expect.probe]]\nprobe = \"{}\"\nresponses = []\n", p.id);
        }
        s
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

/// The QPs, MRs and receives every batch starts from.
const SETUP: &str = r#"format = 3
timeout_ms = 60000

[endpoints.a]
[endpoints.b]

[[qp]]
name = "rc"
type = "rc"
between = ["b", "a"]
psn = { a = 100, b = 500 }
access = { b = ["remote_write", "remote_read", "remote_atomic"] }

[[qp]]
name = "uc"
type = "uc"
between = ["b", "a"]
psn = { a = 1000, b = 5000 }
access = { b = ["remote_write"] }

[[qp]]
name = "ud"
type = "ud"
between = ["b", "a"]

[[qp]]
name = "rc_err"
type = "rc"
between = ["b", "a"]
psn = { a = 2000, b = 6000 }

[[mr]]
name = "target"
on = "b"
size = 64
access = ["local_write", "remote_write", "remote_read", "remote_atomic"]
init = { pattern = "00" }

[[mr]]
name = "locked"
on = "b"
size = 64
access = ["local_write"]
init = { pattern = "5a" }

[[mr]]
name = "rbuf"
on = "b"
size = 4096
access = ["local_write"]

[[step]]
on = "b"
op = "post_recv"
qp = "rc"
wr_id = 1
sge = [{ mr = "rbuf", len = 1024 }]

[[step]]
on = "b"
op = "post_recv"
qp = "uc"
wr_id = 2
sge = [{ mr = "rbuf", offset = 1024, len = 1024 }]

[[step]]
on = "b"
op = "post_recv"
qp = "ud"
wr_id = 3
sge = [{ mr = "rbuf", offset = 2048, len = 2048 }]

[[step]]
on = "b"
op = "modify_qp"
qp = "rc_err"
state = "err"
"#;

/// The memory oracles every responder batch ends with.
/// MR `big` on b, for the messages seeded from captures ([`BIG_SIZE`] bytes).
const BIG: &str = r#"
[[mr]]
name = "big"
on = "b"
size = 4096
access = ["local_write", "remote_write", "remote_read"]
init = { pattern = "00" }
"#;

const BIG_MEMORY: &str = r#"
[[expect.memory]]
on = "b"
mr = "big"
outside = "unchanged"
"#;

const MEMORY: &str = r#"
# Memory: no request may change an MR that allows no remote access, and no
# request may write outside any MR.
[[expect.memory]]
on = "b"
mr = "locked"
unchanged = true
outside = "unchanged"

[[expect.memory]]
on = "b"
mr = "target"
outside = "unchanged"

[[expect.memory]]
on = "b"
mr = "rbuf"
outside = "unchanged"
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_batch_is_drawn_from_its_seed_and_index_alone() {
        assert_eq!(Batch::generate(7, 3, 12), Batch::generate(7, 3, 12));
        assert_ne!(Batch::generate(7, 3, 12), Batch::generate(7, 4, 12));
        assert_ne!(Batch::generate(7, 3, 12), Batch::generate(8, 3, 12));
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
            crate::scenario::check::parse_str(Path::new("fuzz.toml"), &text)
                .unwrap_or_else(|e| panic!("batch {i}: {}", e[0]));
            assert_eq!(b.probes.len(), if b.requester.is_some() { 0 } else { 16 });
            for p in b.probes.iter().filter(|p| p.req.seed.is_some()) {
                seeded += 1;
                let m = &corpus.messages[p.req.seed.unwrap_or_default() as usize];
                assert!(m.packets.iter().any(|c| c.opcode == p.opcode), "{}", p.describe());
                assert!(p.describe().contains("(captured message"), "{}", p.describe());
                if p.req.mr == "big" {
                    assert!(text.contains("name = \"big\""), "{text}");
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
            crate::scenario::check::parse_str(Path::new("fuzz.toml"), &b.toml(&all, "test"))
                .unwrap_or_else(|e| panic!("seed {seed}: {}", e[0]));
        }
        for seed in 0..60 {
            // Every third index is a requester batch: its items are rules,
            // then operations (each a step of a's).
            let b = Batch::generate(seed, seed, 16);
            let all: Vec<usize> = (0..b.items()).collect();
            for keep in [all.clone(), all.iter().copied().step_by(3).collect(), vec![]] {
                let text = b.toml(&keep, "test");
                let sc = crate::scenario::check::parse_str(Path::new("fuzz.toml"), &text)
                    .unwrap_or_else(|e| panic!("seed {seed}: {}\n{text}", e[0]));
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
            let sc =
                crate::scenario::check::parse_str(Path::new("fuzz.toml"), &b.toml(&[0, 1], "t"))
                    .unwrap_or_else(|e| panic!("{plant:?}: {}", e[0]));
            assert_eq!(sc.faults.len(), 1);
        }
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
        assert!(
            text.contains(&format!("[[expect.probe]]\nprobe = \"{}\"\nresponses = []", p.id)),
            "{text}"
        );
        // A plain RC request: the device decides (no expectation).
        let plain = (0..50)
            .flat_map(|i| Batch::generate(6, i, 16).probes)
            .find(|p| p.classes == [Class::Plain] && p.target == Target::Rc)
            .expect("a plain RC probe");
        assert_eq!(plain.silent, None);
    }
}
