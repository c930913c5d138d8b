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
use std::fmt;
use std::ops::{Range, RangeInclusive};
use std::path::Path;

use dissector::text::parse_u64;
use dissector::wire::{NakCode, Opcode};
use serde::{Deserialize, Serialize};

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

/// A rule that does not parse: what is wrong, and where in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// The whole rule as given.
    pub input: String,
    /// Byte range of the offending token in `input`.
    pub span: Range<usize>,
    pub message: String,
    pub hint: Option<String>,
    /// Where the rule came from (`--fault #2`, `faults.toml:7:1`).
    pub origin: Option<String>,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Some(o) => writeln!(f, "bad fault rule ({o}): {}", self.message)?,
            None => writeln!(f, "bad fault rule: {}", self.message)?,
        }
        writeln!(f, "    {}", self.input)?;
        let col = self.input[..self.span.start.min(self.input.len())].chars().count();
        let width =
            self.input.get(self.span.clone()).map(|s| s.chars().count()).unwrap_or(1).max(1);
        write!(f, "    {}{}", " ".repeat(col), "^".repeat(width))?;
        if let Some(h) = &self.hint {
            write!(f, "\nhint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RuleError {}

const ACTIONS: &str = "drop, corrupt, corrupt-icrc, ce, dup, delay, reorder, respond";
const KEYS: &str = "dir, qp, op, psn, nth, prob, seed, limit, icrc, and per action: at, xor (corrupt), copies (dup), ms (delay, reorder), \
                    with, code, timer, credits, len, fill, orig, rpsn, msn, real, reply-qp (respond)";
const REPLIES: &str = "ack, nak, rnr, read-response, atomic-ack";

/// Parses one rule in the `--fault` syntax.
pub fn parse_rule(input: &str) -> Result<Rule, RuleError> {
    let err = |span: Range<usize>, message: String, hint: Option<String>| RuleError {
        input: input.to_string(),
        span,
        message,
        hint,
        origin: None,
    };
    let mut words = tokens(input);
    let Some((action_span, action_word)) = words.next() else {
        return Err(err(
            0..0,
            "empty rule".into(),
            Some(format!("a rule starts with an action: {ACTIONS}")),
        ));
    };
    let action = match action_word.to_ascii_lowercase().as_str() {
        "drop" => Action::Drop,
        "corrupt" => Action::Corrupt { at: Offset::Payload(0), xor: 0xff },
        "corrupt-icrc" | "bad-icrc" => Action::CorruptIcrc,
        "ce" | "ecn-ce" | "ecn" => Action::Ce,
        "dup" | "duplicate" => Action::Dup { copies: 1 },
        "delay" => Action::Delay { ms: 10 },
        "reorder" => Action::Reorder { ms: 100 },
        "respond" => Action::Respond(Respond {
            reply: Reply::Ack { credits: 31 },
            psn_offset: 0,
            msn: None,
            real: Real::Keep,
            reply_qp: None,
        }),
        other => {
            return Err(err(
                action_span,
                format!("unknown action `{other}`"),
                Some(format!(
                    "actions are {ACTIONS}; the action comes first, then key=value words"
                )),
            ))
        }
    };
    let mut rule = Rule::new(action);
    // `respond`'s reply first, so its own keys may come in any order.
    if let Action::Respond(r) = &mut rule.action {
        if let Some((span, w)) =
            tokens(input).find(|(_, w)| w.to_ascii_lowercase().starts_with("with="))
        {
            respond_key(r, "with", &w[5..]).map_err(|(what, hint)| {
                err(
                    span.start + 5..span.end,
                    format!("bad value `{}` for `with`: {what}", &w[5..]),
                    hint,
                )
            })?;
        }
    }
    let mut seen: Vec<String> = Vec::new();
    for (span, word) in words {
        let Some(eq) = word.find('=') else {
            return Err(err(
                span,
                format!("`{word}` is not a key=value word"),
                Some(format!("keys are {KEYS}")),
            ));
        };
        let key = word[..eq].to_ascii_lowercase();
        let value = &word[eq + 1..];
        let vspan = span.start + eq + 1..span.end;
        let kspan = span.start..span.start + eq;
        if seen.contains(&key) {
            return Err(err(kspan, format!("`{key}` given twice"), None));
        }
        seen.push(key.clone());
        let bad = |what: &str, hint: Option<String>| {
            err(vspan.clone(), format!("bad value `{value}` for `{key}`: {what}"), hint)
        };
        if value.is_empty() {
            return Err(bad("empty", None));
        }
        match key.as_str() {
            "dir" | "from" => {
                let d = match (key.as_str(), value.to_ascii_lowercase().as_str()) {
                    ("dir", "a>b" | "a->b" | "ab") | ("from", "a") => Some(Dir::AtoB),
                    ("dir", "b>a" | "b->a" | "ba") | ("from", "b") => Some(Dir::BtoA),
                    ("dir", "any" | "both") => None,
                    _ => return Err(bad("expected a>b, b>a or any (from=a|b)", None)),
                };
                rule.dir = d;
            }
            "qp" | "qpn" | "destqp" => {
                let q = parse_u64(value)
                    .ok_or_else(|| bad("expected a number like 0x11 or 17", None))?;
                if q > 0xff_ffff {
                    return Err(bad("a QP number has 24 bits (at most 0xffffff)", None));
                }
                rule.qp = Some(q as u32);
            }
            "op" | "opcode" => {
                rule.op =
                    Some(parse_op(value).ok_or_else(|| bad("unknown opcode", Some(op_hint())))?)
            }
            "psn" => match parse_range(value) {
                Some((a, b)) if a <= b && b <= 0xff_ffff => rule.psn = Some(a as u32..=b as u32),
                _ => return Err(bad("expected a PSN (24 bits) or a range like 4-7", None)),
            },
            "nth" => {
                rule.nth =
                    Some(parse_u64(value).filter(|&n| n >= 1).ok_or_else(|| {
                        bad("expected a count from 1 (1 = the first match)", None)
                    })?)
            }
            "prob" | "p" => {
                let p: f64 = value
                    .parse()
                    .map_err(|_| bad("expected a probability between 0 and 1", None))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(bad("a probability is between 0 and 1", None));
                }
                rule.prob = Some(p);
            }
            "seed" => {
                rule.seed = Some(parse_u64(value).ok_or_else(|| bad("expected a number", None))?)
            }
            "limit" | "times" => {
                rule.limit = Some(
                    parse_u64(value)
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| bad("expected a count from 1", None))?,
                )
            }
            "icrc" => {
                rule.fix_icrc = match value.to_ascii_lowercase().as_str() {
                    "fix" | "recompute" => true,
                    "keep" => false,
                    _ => return Err(bad("expected fix or keep", None)),
                };
                if !rule.action.modifies() {
                    return Err(err(
                        kspan,
                        format!(
                            "`icrc` only applies to actions that change bytes, not `{}`",
                            rule.action.name()
                        ),
                        None,
                    ));
                }
            }
            "at" | "xor" => {
                let Action::Corrupt { at, xor } = &mut rule.action else {
                    return Err(err(kspan, format!("`{key}` only applies to `corrupt`"), None));
                };
                if key == "at" {
                    *at = parse_offset(value).ok_or_else(|| {
                        bad(
                            "expected N, ip+N, bth+N or payload+N",
                            Some(
                                "N counts bytes from the start of the frame or of that header"
                                    .into(),
                            ),
                        )
                    })?;
                } else {
                    *xor = parse_u64(value)
                        .filter(|&x| (1..=0xff).contains(&x))
                        .ok_or_else(|| bad("expected a non-zero byte like 0x01", None))?
                        as u8;
                }
            }
            "copies" => {
                let Action::Dup { copies } = &mut rule.action else {
                    return Err(err(kspan, "`copies` only applies to `dup`".into(), None));
                };
                *copies = parse_u64(value)
                    .filter(|&n| (1..=MAX_COPIES as u64).contains(&n))
                    .ok_or_else(|| bad(&format!("expected 1 to {MAX_COPIES}"), None))?
                    as u32;
            }
            "ms" => {
                let (Action::Delay { ms } | Action::Reorder { ms }) = &mut rule.action else {
                    return Err(err(
                        kspan,
                        "`ms` only applies to `delay` and `reorder`".into(),
                        None,
                    ));
                };
                *ms = parse_u64(value).filter(|&n| n <= MAX_DELAY_MS).ok_or_else(|| {
                    bad(&format!("expected milliseconds, at most {MAX_DELAY_MS}"), None)
                })?;
            }
            "with" | "code" | "timer" | "credits" | "len" | "fill" | "orig" | "rpsn" | "msn"
            | "real" | "reply-qp" => {
                let Action::Respond(r) = &mut rule.action else {
                    return Err(err(kspan, format!("`{key}` only applies to `respond`"), None));
                };
                respond_key(r, &key, value).map_err(|(what, hint)| bad(&what, hint))?;
                let needs = |ok: bool, which: &str| {
                    if ok {
                        Ok(())
                    } else {
                        Err(err(
                            kspan.clone(),
                            format!("`{key}` only applies to `with={which}`"),
                            None,
                        ))
                    }
                };
                match key.as_str() {
                    "code" => needs(matches!(r.reply, Reply::Nak(_)), "nak")?,
                    "timer" => needs(matches!(r.reply, Reply::Rnr { .. }), "rnr")?,
                    "credits" => needs(matches!(r.reply, Reply::Ack { .. }), "ack")?,
                    "len" | "fill" => {
                        needs(matches!(r.reply, Reply::ReadResponse { .. }), "read-response")?
                    }
                    "orig" => needs(matches!(r.reply, Reply::AtomicAck { .. }), "atomic-ack")?,
                    _ => {}
                }
            }
            _ => {
                return Err(err(
                    kspan,
                    format!("unknown key `{key}`"),
                    Some(format!("keys are {KEYS}")),
                ))
            }
        }
    }
    if let Action::Respond(r) = &rule.action {
        if let Reply::Nak(0) = r.reply {
            if !seen.iter().any(|s| s == "code") {
                let at = input.find("with=").unwrap_or(0);
                return Err(err(at..at + 8, "`with=nak` needs a `code`".into(), Some(nak_codes())));
            }
        }
    }
    if rule.nth.is_some() && rule.prob.is_some() {
        let at = input.find("prob").unwrap_or(0);
        return Err(err(
            at..at + 4,
            "`nth` and `prob` exclude each other".into(),
            Some("pick one frame with nth, or many at random with prob".into()),
        ));
    }
    Ok(rule)
}

/// `4` or `4-7`: a number, or a low-high pair (order not checked).
fn parse_range(v: &str) -> Option<(u64, u64)> {
    match v.split_once('-') {
        Some((a, b)) => Some((parse_u64(a)?, parse_u64(b)?)),
        None => parse_u64(v).map(|n| (n, n)),
    }
}

fn nak_codes() -> String {
    let keys: Vec<&str> = NakCode::ALL.iter().map(|c| c.key()).collect();
    format!("codes are {}", keys.join(", "))
}

/// One `respond` key into `r`: what is wrong with the value otherwise.
fn respond_key(r: &mut Respond, key: &str, value: &str) -> Result<(), (String, Option<String>)> {
    let num = |max: u64, what: &str| {
        parse_u64(value).filter(|&n| n <= max).ok_or_else(|| (what.to_string(), None))
    };
    match key {
        "with" => {
            let reply = match value.to_ascii_lowercase().as_str() {
                "ack" => Reply::Ack { credits: 31 },
                "nak" => Reply::Nak(0),
                "rnr" | "rnr-nak" => Reply::Rnr { first: 0, last: 0 },
                "read-response" | "read" => Reply::ReadResponse { len: None, fill: 0 },
                "atomic-ack" => Reply::AtomicAck { orig: 0 },
                _ => return Err(("unknown response".into(), Some(format!("responses are {REPLIES}")))),
            };
            // Read first (see `parse_rule`): given again, it keeps its keys' values.
            if reply.key() != r.reply.key() {
                r.reply = reply;
            }
        }
        "code" => {
            let c: NakCode = value.parse().map_err(|_| ("unknown NAK code".to_string(), Some(nak_codes())))?;
            if let Reply::Nak(v) = &mut r.reply {
                *v = c.value();
            }
        }
        "timer" => {
            let Some((a, b)) = parse_range(value) else { return Err(("expected a timer code 0–31 or a range like 1-31".into(), None)) };
            if a > b || b > 31 {
                return Err(("timer codes are 0–31 (IBA table 45), a range low-high".into(), None));
            }
            if let Reply::Rnr { first, last } = &mut r.reply {
                (*first, *last) = (a as u8, b as u8);
            }
        }
        "credits" => {
            let c = num(31, "expected a credit count 0–31 (31: no end-to-end credit)")? as u8;
            if let Reply::Ack { credits } = &mut r.reply {
                *credits = c;
            }
        }
        "len" => {
            let l = num(MAX_READ_RESPONSE as u64, &format!("expected a length of at most {MAX_READ_RESPONSE} bytes (one packet)"))? as u32;
            if let Reply::ReadResponse { len, .. } = &mut r.reply {
                *len = Some(l);
            }
        }
        "fill" => {
            let b = num(0xff, "expected a byte like 0x5a")? as u8;
            if let Reply::ReadResponse { fill, .. } = &mut r.reply {
                *fill = b;
            }
        }
        "orig" => {
            let o = parse_u64(value).ok_or_else(|| ("expected a 64-bit number".to_string(), None))?;
            if let Reply::AtomicAck { orig } = &mut r.reply {
                *orig = o;
            }
        }
        "rpsn" => {
            let (neg, digits) = match value.as_bytes().first() {
                Some(b'-') => (true, &value[1..]),
                Some(b'+') => (false, &value[1..]),
                _ => return Err(("expected an offset from the request's PSN like +3 or -1".into(), None)),
            };
            let n = parse_u64(digits).filter(|&n| n < 1 << 23).ok_or_else(|| ("expected an offset below 2^23 like +3".to_string(), None))? as i32;
            r.psn_offset = if neg { -n } else { n };
        }
        "msn" => r.msn = Some(num(0xff_ffff, "an MSN has 24 bits")? as u32),
        "real" => {
            r.real = match value.to_ascii_lowercase().as_str() {
                "keep" => Real::Keep,
                "withhold" => Real::Withhold,
                "lost" | "drop" => Real::Lost,
                _ => return Err(("expected keep, withhold or lost".into(), Some("keep: the real answer goes too; withhold: the responder acts but its answer is held back; lost: the request never reaches it".into()))),
            }
        }
        "reply-qp" => r.reply_qp = Some(num(0xff_ffff, "a QP number has 24 bits")? as u32),
        other => return Err((format!("`{other}` is not a `respond` key"), None)),
    }
    Ok(())
}

/// Whitespace-separated words with their byte spans.
fn tokens(s: &str) -> impl Iterator<Item = (Range<usize>, &str)> {
    let mut rest = 0;
    std::iter::from_fn(move || {
        let start = rest + s[rest..].find(|c: char| !c.is_whitespace())?;
        let end = s[start..].find(char::is_whitespace).map_or(s.len(), |e| start + e);
        rest = end;
        Some((start..end, &s[start..end]))
    })
}

fn parse_offset(s: &str) -> Option<Offset> {
    let lower = s.to_ascii_lowercase();
    for (name, f) in [
        ("payload", Offset::Payload as fn(usize) -> Offset),
        ("bth", Offset::Bth),
        ("ip", Offset::Ip),
    ] {
        if let Some(rest) = lower.strip_prefix(name) {
            return match rest {
                "" => Some(f(0)),
                r => Some(f(parse_u64(r.strip_prefix('+')?)? as usize)),
            };
        }
    }
    Some(Offset::Frame(parse_u64(&lower)? as usize))
}

/// `RDMA WRITE Only` → `rdma-write-only`.
fn op_slug(name: &str) -> String {
    name.to_ascii_lowercase().replace([' ', '_'], "-")
}

fn parse_op(v: &str) -> Option<OpMatch> {
    if let Some(n) = parse_u64(v) {
        return u8::try_from(n).ok().map(OpMatch::Exact);
    }
    let want = op_slug(v);
    let want = match want.as_str() {
        "ack" => "acknowledge".to_string(),
        "atomic-ack" => "atomic-acknowledge".to_string(),
        "cnp" => return Some(OpMatch::Exact(0x81)),
        "read-request"
        | "read-response-first"
        | "read-response-middle"
        | "read-response-last"
        | "read-response-only"
        | "write-first"
        | "write-middle"
        | "write-last"
        | "write-only"
        | "write-last-with-immediate"
        | "write-only-with-immediate" => format!("rdma-{want}"),
        _ => want,
    };
    // `rc-send-only` names one opcode; `send-only` the operation on any transport.
    for code in 0..=255u8 {
        if let Some(info) = Opcode(code).info() {
            let name = op_slug(info.name);
            if name == want {
                return Some(OpMatch::Operation(code & 0x1f));
            }
            if format!("{}-{name}", info.transport.abbrev().to_ascii_lowercase()) == want {
                return Some(OpMatch::Exact(code));
            }
        }
    }
    None
}

fn op_hint() -> String {
    "use a number (0x11) or a name: send-only, send-first, write-only, read-request, read-response-only, ack, \
     atomic-ack, cmpswap, fetchadd, cnp …; prefix rc-/uc-/ud-/xrc- for one transport (ud-send-only)"
        .into()
}

/// Parses every `--fault` text, naming which one failed.
pub fn parse_rules(texts: &[String]) -> Result<Vec<Rule>, RuleError> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            parse_rule(t).map_err(|mut e| {
                e.origin = Some(format!("--fault #{}", i + 1));
                e
            })
        })
        .collect()
}

/// Fault rules from `--fault` texts, then a `--faults` file; the seed from
/// `seed_arg`, else the file's, else 1.
pub fn rules_from(
    texts: &[String],
    file: Option<&Path>,
    seed_arg: Option<u64>,
) -> Result<(Vec<Rule>, u64), RuleError> {
    let mut rules = parse_rules(texts)?;
    let mut seed = None;
    if let Some(f) = file {
        let text = std::fs::read_to_string(f).map_err(|e| RuleError {
            input: String::new(),
            span: 0..0,
            message: format!("cannot read the rule file: {e}"),
            hint: None,
            origin: Some(f.display().to_string()),
        })?;
        let (more, s) = parse_rules_toml(&text, f)?;
        rules.extend(more);
        seed = s;
    }
    Ok((rules, seed_arg.or(seed).unwrap_or(1)))
}

/// A rule file: `seed = N` and `[[rule]]` tables (see the module docs).
pub fn parse_rules_toml(text: &str, file: &Path) -> Result<(Vec<Rule>, Option<u64>), RuleError> {
    let at = |span: Option<Range<usize>>| -> String {
        match span {
            Some(s) => {
                let before = &text[..s.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("{}:{line}:{col}", file.display())
            }
            None => file.display().to_string(),
        }
    };
    let file_err = |span: Option<Range<usize>>, message: String, hint: Option<String>| RuleError {
        input: String::new(),
        span: 0..0,
        message,
        hint,
        origin: Some(at(span)),
    };
    let doc: toml::Spanned<toml::Table> = toml::from_str(text).map_err(|e| {
        let msg = e.message().to_string();
        file_err(e.span(), format!("not valid TOML: {msg}"), None)
    })?;
    let mut seed = None;
    let mut rules = Vec::new();
    for (key, value) in doc.get_ref() {
        match (key.as_str(), value) {
            ("seed", toml::Value::Integer(n)) if *n >= 0 => seed = Some(*n as u64),
            ("seed", _) => {
                return Err(file_err(None, "`seed` must be a non-negative integer".into(), None))
            }
            ("rule", toml::Value::Array(list)) => {
                for (i, item) in list.iter().enumerate() {
                    let toml::Value::Table(t) = item else {
                        return Err(file_err(
                            None,
                            format!("rule #{} is not a table: use [[rule]]", i + 1),
                            None,
                        ));
                    };
                    rules.push(rule_from_table(t, i + 1, text, &at)?);
                }
            }
            (other, _) => {
                return Err(file_err(
                    None,
                    format!("unknown top-level key `{other}`"),
                    Some("a rule file has `seed = N` and [[rule]] tables".into()),
                ))
            }
        }
    }
    Ok((rules, seed))
}

/// Turns one `[[rule]]` table into the text syntax and parses that, so both forms
/// share every check; errors point at the line of the table's first key.
fn rule_from_table(
    t: &toml::Table,
    n: usize,
    text: &str,
    at: &dyn Fn(Option<Range<usize>>) -> String,
) -> Result<Rule, RuleError> {
    // Find the table's position: the n-th `[[rule]]` header.
    let header = text.match_indices("[[rule]]").nth(n - 1).map(|(i, _)| i..i + 8);
    let origin = format!("{} (rule #{n})", at(header));
    let fail = |message: String, hint: Option<String>| RuleError {
        input: String::new(),
        span: 0..0,
        message,
        hint,
        origin: Some(origin.clone()),
    };
    let action = match t.get("action") {
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => return Err(fail("`action` must be a string".into(), None)),
        None => {
            return Err(fail("missing `action`".into(), Some(format!("actions are {ACTIONS}"))))
        }
    };
    let mut line = action;
    for (k, v) in t {
        if k == "action" {
            continue;
        }
        let v = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            _ => return Err(fail(format!("`{k}` must be a string or a number"), None)),
        };
        if v.chars().any(char::is_whitespace) {
            return Err(fail(format!("`{k}` must not contain spaces"), None));
        }
        line.push_str(&format!(" {k}={v}"));
    }
    parse_rule(&line).map_err(|mut e| {
        e.origin = Some(origin.clone());
        e
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_examples_and_round_trips() {
        for s in [
            "drop dir=a>b qp=0x11 psn=4 nth=2",
            "corrupt op=send-only at=payload+0 xor=0x01",
            "corrupt-icrc dir=b>a op=ack nth=1",
            "ce qp=0x12 prob=0.5 seed=7",
            "dup op=write-only copies=1 limit=3",
            "delay dir=a>b ms=20",
            "reorder psn=3",
            "corrupt at=ip+1 icrc=fix",
            "drop op=rc-send-only psn=4-7",
            "drop op=0x81",
            "respond op=write-only nth=1 with=nak code=remote_access_error real=withhold",
            "respond op=send-only with=rnr timer=1-31 real=withhold reply-qp=0x11",
            "respond with=ack credits=0 rpsn=+3 msn=7 real=lost",
            "respond op=read-request with=read-response len=4 fill=0x5a rpsn=-1",
            "respond op=fetchadd with=atomic-ack orig=0x1234",
        ] {
            let r = parse_rule(s).unwrap_or_else(|e| panic!("{e}"));
            let again = parse_rule(&r.to_string()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r, again, "{s} → {r}");
        }
        let r = parse_rule("drop dir=a>b qp=0x11 psn=4 nth=2").unwrap();
        assert_eq!(r.action, Action::Drop);
        let Action::Respond(resp) =
            parse_rule("respond with=ack credits=0 rpsn=-2 real=withhold reply-qp=0x11")
                .unwrap()
                .action
        else {
            panic!()
        };
        assert_eq!(
            resp,
            Respond {
                reply: Reply::Ack { credits: 0 },
                psn_offset: -2,
                msn: None,
                real: Real::Withhold,
                reply_qp: Some(0x11)
            }
        );
        // Keys may come before `with`.
        let Action::Respond(resp) = parse_rule("respond timer=5 with=rnr").unwrap().action else {
            panic!()
        };
        assert_eq!(resp.reply, Reply::Rnr { first: 5, last: 5 });
        assert_eq!(
            (r.dir, r.qp, r.psn, r.nth),
            (Some(Dir::AtoB), Some(0x11), Some(4..=4), Some(2))
        );
    }

    #[test]
    fn opcode_names() {
        assert_eq!(parse_op("send-only"), Some(OpMatch::Operation(0x04)));
        assert_eq!(parse_op("SEND_ONLY"), Some(OpMatch::Operation(0x04)));
        assert_eq!(parse_op("ud-send-only"), Some(OpMatch::Exact(0x64)));
        assert_eq!(parse_op("ack"), Some(OpMatch::Operation(0x11)));
        assert_eq!(parse_op("write-only"), Some(OpMatch::Operation(0x0a)));
        assert_eq!(parse_op("rc-rdma-write-only"), Some(OpMatch::Exact(0x0a)));
        assert_eq!(parse_op("17"), Some(OpMatch::Exact(0x11)));
        assert_eq!(parse_op("cnp"), Some(OpMatch::Exact(0x81)));
        assert_eq!(parse_op("bogus"), None);
        let m = OpMatch::Operation(0x04);
        assert!(
            m.matches(0x04)
                && m.matches(0x24)
                && m.matches(0x64)
                && !m.matches(0x05)
                && !m.matches(0x84)
        );
    }

    fn error_at(s: &str) -> (String, String) {
        let e = parse_rule(s).unwrap_err();
        (s[e.span.clone()].to_string(), e.to_string())
    }

    #[test]
    fn errors_point_at_the_offending_token() {
        let cases = [
            ("dorp qp=1", "dorp", "unknown action"),
            ("drop qpx=1", "qpx", "unknown key"),
            ("drop qp=zz", "zz", "bad value `zz` for `qp`"),
            ("drop qp=0x1000000", "0x1000000", "24 bits"),
            ("drop dir=a<b", "a<b", "expected a>b"),
            ("drop psn=7-4", "7-4", "range"),
            ("drop nth=0", "0", "count from 1"),
            ("drop prob=1.5", "1.5", "between 0 and 1"),
            ("drop op=send-onyl", "send-onyl", "unknown opcode"),
            ("drop xor=1", "xor", "only applies to `corrupt`"),
            ("drop ms=5", "ms", "only applies to `delay`"),
            ("corrupt xor=0", "0", "non-zero"),
            ("corrupt at=tail+1", "tail+1", "expected N, ip+N"),
            ("dup copies=99", "99", "expected 1 to 16"),
            ("delay ms=999999", "999999", "at most"),
            ("drop qp=1 qp=2", "qp", "given twice"),
            ("drop qp", "qp", "not a key=value"),
            ("drop icrc=fix", "icrc", "only applies to actions that change bytes"),
            ("drop nth=2 prob=0.5", "prob", "exclude each other"),
            ("drop qp=", "", "empty"),
            ("drop with=ack", "with", "only applies to `respond`"),
            ("respond with=nack", "nack", "unknown response"),
            ("respond with=nak", "with=nak", "needs a `code`"),
            ("respond with=nak code=bogus", "bogus", "unknown NAK code"),
            ("respond with=ack code=invalid_request", "code", "only applies to `with=nak`"),
            (
                "respond credits=0 with=nak code=invalid_request",
                "credits",
                "only applies to `with=ack`",
            ),
            ("respond with=rnr timer=32", "32", "0–31"),
            ("respond with=rnr timer=9-3", "9-3", "0–31"),
            ("respond with=read-response len=5000", "5000", "one packet"),
            ("respond with=ack rpsn=3", "3", "like +3"),
            ("respond with=ack real=maybe", "maybe", "keep, withhold or lost"),
            ("respond with=ack reply-qp=0x1000000", "0x1000000", "24 bits"),
        ];
        for (input, token, msg) in cases {
            let (got, text) = error_at(input);
            assert_eq!(got, token, "{input}: {text}");
            assert!(text.contains(msg), "{input}: expected `{msg}` in\n{text}");
        }
        let e = parse_rule("").unwrap_err();
        assert!(e.to_string().contains("empty rule"));
        // The caret sits under the token.
        let text = parse_rule("drop qp=1 bogus=2").unwrap_err().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "    drop qp=1 bogus=2");
        assert_eq!(lines[2], "              ^^^^^");
    }

    #[test]
    fn toml_rules() {
        let text = "seed = 9\n\n[[rule]]\naction = \"drop\"\ndir = \"a>b\"\nqp = 17\npsn = 4\nnth = 2\n\n[[rule]]\naction = \"ce\"\nprob = 0.25\n";
        let (rules, seed) = parse_rules_toml(text, Path::new("f.toml")).unwrap();
        assert_eq!(seed, Some(9));
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0], parse_rule("drop dir=a>b qp=0x11 psn=4 nth=2").unwrap());
        assert_eq!(rules[1].prob, Some(0.25));

        let e = parse_rules_toml(
            "[[rule]]\naction = \"drop\"\n\n[[rule]]\naction = \"drop\"\nqpx = 1\n",
            Path::new("f.toml"),
        )
        .unwrap_err();
        assert_eq!(e.origin.as_deref(), Some("f.toml:4:1 (rule #2)"), "{e}");
        assert!(e.to_string().contains("unknown key `qpx`"), "{e}");
        let e = parse_rules_toml("[[rule]]\ndir = \"a>b\"\n", Path::new("f.toml")).unwrap_err();
        assert!(e.to_string().contains("missing `action`"), "{e}");
        let e = parse_rules_toml("rules = 1\n", Path::new("f.toml")).unwrap_err();
        assert!(e.to_string().contains("unknown top-level key `rules`"), "{e}");
        let e = parse_rules_toml("[[rule]\n", Path::new("f.toml")).unwrap_err();
        assert!(e.to_string().contains("f.toml:1:"), "{e}");
    }

    #[test]
    fn rng_is_reproducible() {
        let a: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..5).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        let mut r = Rng::new(1);
        assert!((0..1000).map(|_| r.next_f64()).all(|x| (0.0..1.0).contains(&x)));
    }
}
