//! Fault rules for the lab switch: what to do to which RoCE frames.
//!
//! A rule is an action followed by `key=value` words (the syntax of `--fault`):
//!
//! ```text
//! drop dir=a>b qp=0x11 psn=4 nth=2        the 2nd transmission of PSN 4 on QP 0x11
//! corrupt op=send-only at=payload+0 xor=0x01
//! corrupt-icrc dir=b>a op=ack nth=1
//! ce qp=0x12 prob=0.5 seed=7
//! dup op=write-only copies=1 limit=3
//! delay dir=a>b ms=20
//! reorder psn=3
//! respond op=write-only nth=1 with=nak code=remote_access_error real=withhold
//! respond op=send-only with=rnr timer=1-31 real=withhold
//! ```
//!
//! `respond` plays the responder toward the requester: when a request matches, the
//! switch sends the requester a response built with the dissector's emit side
//! (correct QPN, PSN, MSN and ICRC) — an ACK, a NAK, an RNR NAK, a READ response or
//! an ATOMIC Acknowledge — and, with `real=withhold`, holds back the responder's own
//! answer to that request, or with `real=lost` does not deliver the request at all.
//! See [`Respond`].
//!
//! Rules only touch RoCE frames (UDP destination port 4791); TCP, ARP and the rest
//! pass untouched, so faults never break the out-of-band exchange of the tools.
//! A rule file is TOML, one `[[rule]]` table per rule with the same keys and the
//! action under `action`; see [`parse_rules_toml`].
//!
//! Owns: the rule types ([`Rule`], [`Action`], [`Respond`], …), their canonical text
//! form (`Display`, which parses back to the same rule) and the seeded [`Rng`]; its
//! rooms: `parse` (rules from text and TOML), `diag` ([`RuleError`]). Imports: nothing
//! from the crate (opcode and NAK names come from `dissector`): the switch, the daemon
//! and the client take rules from here as data.
use std::fmt;
use std::ops::RangeInclusive;

use dissector::wire::{NakCode, Opcode};
use serde::{Deserialize, Serialize};

mod diag;
mod parse;
#[cfg(test)]
mod tests;

pub use diag::RuleError;
pub use parse::{parse_rule, parse_rules, parse_rules_toml, rules_from};

/// The longest delay or hold a rule may ask for.
pub const MAX_DELAY_MS: u64 = 10_000;
pub const MAX_COPIES: u32 = 16;

/// Which way a frame travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dir {
    /// Sent by VM a, delivered to VM b.
    AtoB,
    BtoA,
}

impl Dir {
    pub fn sender(self) -> &'static str {
        match self {
            Dir::AtoB => "a",
            Dir::BtoA => "b",
        }
    }
    pub fn index(self) -> usize {
        match self {
            Dir::AtoB => 0,
            Dir::BtoA => 1,
        }
    }
    /// The way back.
    pub fn reverse(self) -> Dir {
        match self {
            Dir::AtoB => Dir::BtoA,
            Dir::BtoA => Dir::AtoB,
        }
    }
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dir::AtoB => "a>b",
            Dir::BtoA => "b>a",
        })
    }
}

/// Where in the frame `corrupt` flips bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Offset {
    /// From the start of the Ethernet frame.
    Frame(usize),
    /// From the start of the IP header.
    Ip(usize),
    /// From the start of the BTH.
    Bth(usize),
    /// From the start of the RoCE payload (after the extension headers).
    Payload(usize),
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Offset::Frame(n) => write!(f, "{n}"),
            Offset::Ip(n) => write!(f, "ip+{n}"),
            Offset::Bth(n) => write!(f, "bth+{n}"),
            Offset::Payload(n) => write!(f, "payload+{n}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    Drop,
    /// XOR one byte with `xor`.
    Corrupt {
        at: Offset,
        xor: u8,
    },
    /// Invert the four ICRC bytes.
    CorruptIcrc,
    /// Set ECN to Congestion Experienced (11) in the IP header.
    Ce,
    /// Forward the frame and then `copies` more copies of it.
    Dup {
        copies: u32,
    },
    /// Hold the frame for `ms` milliseconds.
    Delay {
        ms: u64,
    },
    /// Hold the frame until the next frame in the same direction has gone past (or
    /// `ms` elapsed), so the two arrive swapped.
    Reorder {
        ms: u64,
    },
    /// Answer the request in the responder's place.
    Respond(Respond),
}

/// What a `respond` rule sends back, and what becomes of the real exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Respond {
    pub reply: Reply,
    /// The response's PSN: the request's plus this (`rpsn=+3`; a ghost ACK).
    pub psn_offset: i32,
    /// The AETH's MSN; `None`: the responder's count as the switch saw it (one
    /// per request message it let through, as a responder counts).
    pub msn: Option<u32>,
    pub real: Real,
    /// The requester's QPN, where the response goes. A scenario's `[[fault]]`
    /// fills it in from its `qp` and `from`; on the command line, `reply-qp=`.
    pub reply_qp: Option<u32>,
}

/// The response a `respond` rule builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Acknowledge; the AETH's credit count (31: no end-to-end credit).
    Ack { credits: u8 },
    /// RNR NAK. Given a range, the n-th time the rule applies it sends timer code
    /// `first + n - 1`, and the rule applies at most once per code.
    Rnr { first: u8, last: u8 },
    /// NAK with this code.
    Nak(u8),
    /// RDMA READ Response Only: `len` bytes (`None`: the request's DMA length) of
    /// `fill`.
    ReadResponse { len: Option<u32>, fill: u8 },
    /// ATOMIC Acknowledge carrying this original value.
    AtomicAck { orig: u64 },
}

impl Reply {
    fn key(&self) -> &'static str {
        match self {
            Reply::Ack { .. } => "ack",
            Reply::Rnr { .. } => "rnr",
            Reply::Nak(_) => "nak",
            Reply::ReadResponse { .. } => "read-response",
            Reply::AtomicAck { .. } => "atomic-ack",
        }
    }
}

/// What happens to the real request and the responder's answer to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Real {
    /// Both go through: the crafted response comes in addition (it reaches the
    /// requester first).
    Keep,
    /// The request goes through; the responder's answer to it (its first response
    /// at or past the request's PSN) is withheld, so the crafted one stands alone.
    Withhold,
    /// The request is not delivered (the responder never sees it).
    Lost,
}

impl Real {
    fn key(self) -> &'static str {
        match self {
            Real::Keep => "keep",
            Real::Withhold => "withhold",
            Real::Lost => "lost",
        }
    }
}

/// The largest READ Response a `respond` rule builds (one packet).
pub const MAX_READ_RESPONSE: u32 = 4096;

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::Drop => "drop",
            Action::Corrupt { .. } => "corrupt",
            Action::CorruptIcrc => "corrupt-icrc",
            Action::Ce => "ce",
            Action::Dup { .. } => "dup",
            Action::Delay { .. } => "delay",
            Action::Reorder { .. } => "reorder",
            Action::Respond(_) => "respond",
        }
    }
    /// Changes the bytes of the frame.
    pub fn modifies(&self) -> bool {
        matches!(self, Action::Corrupt { .. } | Action::CorruptIcrc | Action::Ce)
    }
}

/// Which opcodes a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpMatch {
    /// Exactly this opcode.
    Exact(u8),
    /// This operation (low five bits) on any transport, e.g. `send-only`.
    Operation(u8),
}

impl OpMatch {
    fn matches(self, op: u8) -> bool {
        match self {
            OpMatch::Exact(o) => o == op,
            // Only transports that carry the 32 operations (not CNP / vendor).
            OpMatch::Operation(o) => op & 0x1f == o && !matches!(op >> 5, 4 | 6 | 7),
        }
    }
}

impl fmt::Display for OpMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpMatch::Exact(o) => write!(f, "{o:#04x}"),
            OpMatch::Operation(o) => {
                f.write_str(&op_slug(Opcode(*o).info().map(|i| i.name).unwrap_or("?")))
            }
        }
    }
}

/// One fault rule, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub action: Action,
    pub dir: Option<Dir>,
    pub qp: Option<u32>,
    pub op: Option<OpMatch>,
    pub psn: Option<RangeInclusive<u32>>,
    /// Apply only to the n-th frame (1-based) that matches dir/qp/op/psn.
    pub nth: Option<u64>,
    /// Apply to each matching frame with this probability.
    pub prob: Option<f64>,
    /// Seed of this rule's random numbers (default: the run's seed).
    pub seed: Option<u64>,
    /// Apply at most this many times.
    pub limit: Option<u64>,
    /// After changing bytes, recompute the ICRC so the receiver accepts the frame.
    pub fix_icrc: bool,
}

impl Rule {
    fn new(action: Action) -> Rule {
        Rule {
            action,
            dir: None,
            qp: None,
            op: None,
            psn: None,
            nth: None,
            prob: None,
            seed: None,
            limit: None,
            fix_icrc: false,
        }
    }

    /// The most times the rule applies: its `limit`, and for an RNR range one
    /// application per timer code, whichever is fewer.
    pub fn cap(&self) -> Option<u64> {
        let codes = match self.action {
            Action::Respond(Respond { reply: Reply::Rnr { first, last }, .. }) => {
                Some(u64::from(last.saturating_sub(first)) + 1)
            }
            _ => None,
        };
        match (self.limit, codes) {
            (Some(l), Some(c)) => Some(l.min(c)),
            (l, c) => l.or(c),
        }
    }

    /// The frame's BTH fields match (dir/qp/op/psn; `nth`, `prob` and `limit` are
    /// decided by the switch, which keeps the counts).
    pub fn matches(&self, dir: Dir, opcode: u8, qp: u32, psn: u32) -> bool {
        self.dir.is_none_or(|d| d == dir)
            && self.qp.is_none_or(|q| q == qp)
            && self.op.is_none_or(|o| o.matches(opcode))
            && self.psn.as_ref().is_none_or(|r| r.contains(&psn))
    }
}

/// The canonical text form; parses back to the same rule.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.action.name())?;
        if let Some(d) = self.dir {
            write!(f, " dir={d}")?;
        }
        if let Some(q) = self.qp {
            write!(f, " qp={q:#x}")?;
        }
        if let Some(o) = self.op {
            write!(f, " op={o}")?;
        }
        if let Some(r) = &self.psn {
            if r.start() == r.end() {
                write!(f, " psn={}", r.start())?;
            } else {
                write!(f, " psn={}-{}", r.start(), r.end())?;
            }
        }
        if let Some(n) = self.nth {
            write!(f, " nth={n}")?;
        }
        if let Some(p) = self.prob {
            write!(f, " prob={p}")?;
        }
        if let Some(s) = self.seed {
            write!(f, " seed={s}")?;
        }
        if let Some(l) = self.limit {
            write!(f, " limit={l}")?;
        }
        match self.action {
            Action::Corrupt { at, xor } => write!(f, " at={at} xor={xor:#04x}")?,
            Action::Dup { copies } => write!(f, " copies={copies}")?,
            Action::Delay { ms } | Action::Reorder { ms } => write!(f, " ms={ms}")?,
            Action::Respond(r) => {
                write!(f, " with={}", r.reply.key())?;
                match r.reply {
                    Reply::Ack { credits: 31 } => {}
                    Reply::Ack { credits } => write!(f, " credits={credits}")?,
                    Reply::Rnr { first, last } if first == last => write!(f, " timer={first}")?,
                    Reply::Rnr { first, last } => write!(f, " timer={first}-{last}")?,
                    Reply::Nak(code) => write!(f, " code={}", NakCode::from_value(code).key())?,
                    Reply::ReadResponse { len, fill } => {
                        if let Some(l) = len {
                            write!(f, " len={l}")?;
                        }
                        write!(f, " fill={fill:#04x}")?;
                    }
                    Reply::AtomicAck { orig } => write!(f, " orig={orig:#x}")?,
                }
                if r.psn_offset != 0 {
                    write!(f, " rpsn={:+}", r.psn_offset)?;
                }
                if let Some(m) = r.msn {
                    write!(f, " msn={m}")?;
                }
                if r.real != Real::Keep {
                    write!(f, " real={}", r.real.key())?;
                }
                if let Some(q) = r.reply_qp {
                    write!(f, " reply-qp={q:#x}")?;
                }
            }
            _ => {}
        }
        if self.fix_icrc {
            f.write_str(" icrc=fix")?;
        }
        Ok(())
    }
}

/// `RDMA WRITE Only` → `rdma-write-only`.
fn op_slug(name: &str) -> String {
    name.to_ascii_lowercase().replace([' ', '_'], "-")
}

/// splitmix64: tiny, good enough for fault probabilities, identical everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
