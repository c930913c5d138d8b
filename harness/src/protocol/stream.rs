//! Streams of work requests (`op = "stream"`): what the controller orders, the
//! bytes every message carries, and what the agent reports back.
//!
//! A stream's content is a function of its seed alone: message `i` has a length
//! drawn from the stream's sizes and bytes drawn from `(seed, i)`, and the messages
//! lie back to back from the stream's offset. So the target's memory is checked on
//! the endpoint that holds it ([`StreamContent::verify`]), message by message, and only
//! the verdict crosses the agent protocol, never the memory.
//!
//! Owns: [`StreamContent`], [`Sizes`], [`Spread`], [`StreamVerb`], the atomic ops and their
//! chain, the memory verification and the reported percentiles, and
//! [`STREAM_MESSAGES`]. Imports: nothing of the crate; dissector's hex text (for bytes
//! in JSON).
use core::fmt;

use serde::{Deserialize, Serialize};

/// The most messages one stream may post (each costs the agent nothing kept
/// but a signalled one's latency sample).
pub(crate) const STREAM_MESSAGES: u64 = 10_000_000;

/// How long each message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Sizes {
    Fixed(u32),
    /// Uniform in `min..=max`, drawn from the seed.
    Uniform {
        min: u32,
        max: u32,
    },
}

/// What a stream's messages hold and where each lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamContent {
    pub seed: u64,
    pub count: u64,
    pub sizes: Sizes,
    /// The messages go round a ring of this many bytes: one that would run past
    /// its end starts again at its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring: Option<u64>,
    /// How the messages are dealt to the stream's QPs.
    #[serde(default, skip_serializing_if = "Spread::is_round_robin")]
    pub spread: Spread,
}

/// How a stream's messages are dealt to its QPs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Spread {
    /// Message `i` on QP `i mod n`.
    #[default]
    RoundRobin,
    /// Each message on a QP drawn from the stream's seed.
    Random,
}

impl Spread {
    fn is_round_robin(&self) -> bool {
        *self == Spread::RoundRobin
    }
}

/// splitmix64: one step of a small, fast, well-mixed generator.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl StreamContent {
    /// The length of message `i`.
    pub(crate) fn len(&self, i: u64) -> u32 {
        match self.sizes {
            Sizes::Fixed(n) => n,
            Sizes::Uniform { min, max } => {
                let span = u64::from(max.saturating_sub(min)) + 1;
                min + (mix(self.seed ^ mix(i ^ 0x5151_5151)) % span) as u32
            }
        }
    }

    /// Each message's offset from the stream's start and its length, in order.
    pub(crate) fn layout(&self) -> impl Iterator<Item = (u64, u64, u32)> + '_ {
        let mut off = 0u64;
        (0..self.count).map(move |i| {
            let len = self.len(i);
            if self.ring.is_some_and(|r| off + u64::from(len) > r) {
                off = 0;
            }
            let at = off;
            off += u64::from(len);
            (i, at, len)
        })
    }

    /// How many bytes from the stream's start its messages touch.
    pub(crate) fn span(&self) -> u64 {
        match self.ring {
            Some(r) => {
                self.layout().map(|(_, at, len)| at + u64::from(len)).max().unwrap_or(0).min(r)
            }
            None => self.total(),
        }
    }

    /// The QP (of `n`) that carries message `i`.
    pub(crate) fn qp_of(&self, i: u64, n: u64) -> usize {
        let n = n.max(1);
        (match self.spread {
            Spread::RoundRobin => i % n,
            Spread::Random => mix(self.seed ^ 0x0a11_0ca7 ^ mix(i.wrapping_add(0x3c3c))) % n,
        }) as usize
    }

    /// How many messages each of `n` QPs carries.
    pub(crate) fn per_qp(&self, n: u64) -> Vec<u64> {
        let n = n.max(1);
        match self.spread {
            Spread::RoundRobin => {
                (0..n).map(|q| self.count / n + u64::from(q < self.count % n)).collect()
            }
            Spread::Random => {
                let mut v = vec![0u64; n as usize];
                for i in 0..self.count {
                    v[self.qp_of(i, n)] += 1;
                }
                v
            }
        }
    }

    /// The messages QP `q` (of `n`) carries, in order: its `k`-th is the stream's
    /// message `on_qp(q, n).nth(k)`.
    pub(crate) fn on_qp(&self, q: usize, n: u64) -> Box<dyn Iterator<Item = u64> + '_> {
        match self.spread {
            Spread::RoundRobin => Box::new((q as u64..self.count).step_by(n.max(1) as usize)),
            Spread::Random => Box::new((0..self.count).filter(move |&i| self.qp_of(i, n) == q)),
        }
    }

    /// The longest a message can be.
    pub(crate) fn max_len(&self) -> u32 {
        match self.sizes {
            Sizes::Fixed(n) => n,
            Sizes::Uniform { max, .. } => max,
        }
    }

    /// Whether `got` is message `i` as seeded: where it first differs, and a few
    /// bytes from there (`offset` is the message's own).
    pub(crate) fn check_message(&self, i: u64, got: &[u8]) -> Option<Mismatch> {
        let mut want = vec![0u8; self.len(i) as usize];
        self.fill(i, &mut want);
        if got == want.as_slice() {
            return None;
        }
        let first =
            got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(got.len().min(want.len()));
        let end = (first + SHOWN).min(want.len());
        Some(Mismatch {
            message: i,
            offset: first as u64,
            want: want.get(first..end).unwrap_or(&[]).to_vec(),
            got: got.get(first..(first + SHOWN).min(got.len())).unwrap_or(&[]).to_vec(),
        })
    }

    /// The bytes of every message together.
    pub(crate) fn total(&self) -> u64 {
        match self.sizes {
            Sizes::Fixed(n) => self.count * u64::from(n),
            Sizes::Uniform { .. } => self.layout().map(|(_, _, l)| u64::from(l)).sum(),
        }
    }

    /// Fills `out` with the bytes of message `i` (as long as `out` is).
    pub(crate) fn fill(&self, i: u64, out: &mut [u8]) {
        let key = mix(self.seed.rotate_left(17) ^ mix(i));
        for (w, chunk) in out.chunks_mut(8).enumerate() {
            let v = mix(key ^ (w as u64)).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }

    /// Writes every message into `region` (the stream's start), as a source.
    pub(crate) fn write_all(&self, region: &mut [u8]) {
        for (i, at, len) in self.layout() {
            let at = at as usize;
            if let Some(dst) = region.get_mut(at..at + len as usize) {
                self.fill(i, dst);
            }
        }
    }

    /// Whether `region` (the stream's start) holds every message as seeded: the
    /// first one that does not, where, and a few of its bytes.
    pub(crate) fn verify(&self, region: &[u8]) -> Verification {
        // The first message that runs past the region (the MR from the stream's
        // start) is a mismatch there; what is held to check the others is
        // bounded by the region, whatever sizes the order names.
        let past = self.layout().find(|&(_, at, len)| at + u64::from(len) > region.len() as u64);
        if self.ring.is_some() {
            return match past {
                Some(p) => self.past_the_end(p, region.len()),
                None => self.verify_ring(region),
            };
        }
        let mut want = Vec::new();
        let mut digest = 0xcbf2_9ce4_8422_2325u64;
        for (i, at, len) in self.layout() {
            if let Some(p) = past.filter(|p| p.0 == i) {
                return self.past_the_end(p, region.len());
            }
            want.resize(len as usize, 0);
            self.fill(i, &mut want);
            let at = at as usize;
            let got = region.get(at..at + len as usize).unwrap_or(&[]);
            if got != want.as_slice() {
                // The first byte that differs, and what follows it.
                let first = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(got.len());
                let end = (first + SHOWN).min(want.len());
                return Verification {
                    messages: self.count,
                    bytes: self.total(),
                    digest: None,
                    mismatch: Some(Mismatch {
                        message: i,
                        offset: (at + first) as u64,
                        want: want[first..end].to_vec(),
                        got: got.get(first..end.min(got.len())).unwrap_or(&[]).to_vec(),
                    }),
                };
            }
            for w in got.chunks(8) {
                let mut b = [0u8; 8];
                b[..w.len()].copy_from_slice(w);
                digest = mix(digest ^ u64::from_le_bytes(b));
            }
        }
        Verification {
            messages: self.count,
            bytes: self.total(),
            digest: Some(format!("{digest:016x}")),
            mismatch: None,
        }
    }
}

impl StreamContent {
    /// Message `i` (at `at`) runs past the end of a region of `end` bytes: a
    /// mismatch at the end, its expected bytes from there, nothing found.
    fn past_the_end(&self, (i, at, len): (u64, u64, u32), end: usize) -> Verification {
        let offset = at.max(end as u64);
        let from = offset - at;
        let want = (from..(from + SHOWN as u64).min(u64::from(len)))
            .map(|pos| self.byte(i, pos))
            .collect();
        Verification {
            messages: self.count,
            bytes: self.total(),
            digest: None,
            mismatch: Some(Mismatch { message: i, offset, want, got: Vec::new() }),
        }
    }

    /// Byte `pos` of message `i`, as [`StreamContent::fill`] writes it.
    fn byte(&self, i: u64, pos: u64) -> u8 {
        let key = mix(self.seed.rotate_left(17) ^ mix(i));
        mix(key ^ (pos / 8)).to_le_bytes()[(pos % 8) as usize]
    }

    /// A ring holds the last message written over each byte: those bytes are
    /// checked, each against the message that wrote it last, and the messages
    /// still showing counted.
    fn verify_ring(&self, region: &[u8]) -> Verification {
        let span = self.span() as usize;
        let mut want = vec![0u8; span];
        // The last message over each byte (u32::MAX: none; streams are shorter).
        let mut owner = vec![u32::MAX; span];
        let mut starts = std::collections::HashMap::new();
        for (i, at, len) in self.layout() {
            let (a, b) = (at as usize, at as usize + len as usize);
            self.fill(i, &mut want[a..b]);
            owner[a..b].fill(i as u32);
            starts.insert(i, at);
        }
        let got = region.get(..span).unwrap_or(region);
        let mut digest = 0xcbf2_9ce4_8422_2325u64;
        let mut shown = std::collections::BTreeSet::new();
        for (k, &o) in owner.iter().enumerate() {
            if o == u32::MAX {
                continue;
            }
            let o = u64::from(o);
            shown.insert(o);
            let g = got.get(k).copied();
            if g != Some(want[k]) {
                let start = starts.get(&o).copied().unwrap_or(0) as usize;
                let end = (k + SHOWN).min(start + self.len(o) as usize).min(span);
                return Verification {
                    messages: shown.len() as u64,
                    bytes: owner.iter().filter(|&&x| x != u32::MAX).count() as u64,
                    digest: None,
                    mismatch: Some(Mismatch {
                        message: o,
                        offset: k as u64,
                        want: want[k..end].to_vec(),
                        got: got.get(k..end.min(got.len())).unwrap_or(&[]).to_vec(),
                    }),
                };
            }
            digest = mix(digest ^ (u64::from(want[k]) | (k as u64) << 8));
        }
        let bytes = owner.iter().filter(|&&x| x != u32::MAX).count() as u64;
        Verification {
            messages: shown.len() as u64,
            bytes,
            digest: Some(format!("{digest:016x}")),
            mismatch: None,
        }
    }
}

/// How many bytes of a mismatch the report shows.
const SHOWN: usize = 16;

/// What a check of a stream's target memory found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Verification {
    pub messages: u64,
    pub bytes: u64,
    /// Of the whole region, when every message is as seeded.
    pub digest: Option<String>,
    pub mismatch: Option<Mismatch>,
}

/// The first message of a stream that is not in memory as seeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Mismatch {
    pub message: u64,
    /// From the stream's start.
    pub offset: u64,
    #[serde(with = "hex_bytes")]
    pub want: Vec<u8>,
    #[serde(with = "hex_bytes")]
    pub got: Vec<u8>,
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&dissector::text::hex_string(b))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        dissector::text::hex_bytes(&s).map_err(serde::de::Error::custom)
    }
}

/// The verb a stream posts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum StreamVerb {
    /// Local source → the peer's MR, message `i` at the same offset on both.
    Write,
    /// The peer's MR → local, message `i` at the same offset on both.
    Read,
    /// Atomics on the one word at the remote offset, which holds `from` before
    /// the first: every message adds `add` (FetchAdd), but every
    /// `cmp_swap_every`-th is a CmpSwap of the value the word must hold by then
    /// for that value plus `add` (0: none). Each old value lands in the next 8
    /// bytes of the local MR, and they must chain (see [`AtomicChain`]).
    Atomic { add: u64, cmp_swap_every: u32, from: u64 },
    /// Local source → the peer's receives, which it keeps posted and checks as
    /// each message arrives.
    Send,
    /// Local source → the peer's MR as `Write`, each message's index its
    /// immediate, which consumes one of the receives the peer keeps posted (of no
    /// bytes) and which the peer checks.
    WriteImm,
    /// The peer's side of a SEND stream.
    Receive,
}

impl StreamVerb {
    pub(crate) fn name(self) -> &'static str {
        match self {
            StreamVerb::Write => "write",
            StreamVerb::Read => "read",
            StreamVerb::Atomic { cmp_swap_every: 0, .. } => "fetch_add",
            StreamVerb::Atomic { .. } => "atomics",
            StreamVerb::Send => "send",
            StreamVerb::WriteImm => "write_imm",
            StreamVerb::Receive => "receive",
        }
    }
}

/// One atomic of a stream: what it is and what it asks of the word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    FetchAdd {
        add: u64,
    },
    /// Swap in `swap` if the word equals `compare`.
    CmpSwap {
        compare: u64,
        swap: u64,
    },
}

impl StreamVerb {
    /// Message `i` of an atomic stream. Message `i`'s CmpSwap compares with
    /// `from + i·add`, what the word holds once each message before it ran once
    /// (RC atomics on one QP run in order), and swaps in one `add` more: so a
    /// CmpSwap adds exactly as a FetchAdd would, and the final word is
    /// `from + count·add` unless an atomic ran twice or never.
    pub(crate) fn atomic(self, i: u64) -> Option<AtomicOp> {
        let StreamVerb::Atomic { add, cmp_swap_every, from } = self else { return None };
        let before = from.wrapping_add(add.wrapping_mul(i));
        Some(match cmp_swap_every {
            k if k > 0 && (i + 1).is_multiple_of(u64::from(k)) => {
                AtomicOp::CmpSwap { compare: before, swap: before.wrapping_add(add) }
            }
            _ => AtomicOp::FetchAdd { add },
        })
    }
}

/// The old values a stream's atomics returned, checked: each atomic saw the word
/// one `add` further than the one before, from `from`, so every add ran exactly
/// once. On one QP the atomics run in order and message `i` must see
/// `from + i·add`; over several, in no order known beforehand, the values must be
/// exactly `from`, `from + add`, … once each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AtomicChain {
    /// How many old values were checked (the completed messages').
    pub checked: u64,
    /// What the word must hold after them: `from + checked·add`.
    pub end: u64,
    pub first_break: Option<ChainBreak>,
}

/// Where the chain of old values broke.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case", tag = "kind")]
pub(crate) enum ChainBreak {
    /// Message `message` (in posting order, one QP) saw `got` where the chain says `want`.
    Out { message: u64, want: u64, got: u64 },
    /// Over several QPs: the value `want` was seen `times` times, not once (0: an
    /// add lost, 2 or more: one ran twice).
    Count { want: u64, times: u64 },
    /// A value no add of the chain could give.
    Stray { got: u64 },
}

impl fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainBreak::Out { message, want, got } => {
                write!(f, "message {message} saw the word at {got}, not {want}")
            }
            ChainBreak::Count { want, times: 0 } => {
                write!(f, "no atomic saw the word at {want}: an add was lost or ran twice")
            }
            ChainBreak::Count { want, times } => {
                write!(f, "{times} atomics saw the word at {want}: one ran twice")
            }
            ChainBreak::Stray { got } => {
                write!(f, "an atomic saw the word at {got}, which no run of the adds gives")
            }
        }
    }
}

impl AtomicChain {
    /// Checks `old` (message `i`'s old value at index `i`, the completed ones) for
    /// a stream of `add` from `from`; `ordered` when it ran on one QP.
    pub(crate) fn check(old: &[u64], from: u64, add: u64, ordered: bool) -> AtomicChain {
        let n = old.len() as u64;
        let at = |k: u64| from.wrapping_add(add.wrapping_mul(k));
        let first_break = if ordered {
            (0..n).zip(old).find(|(k, &got)| got != at(*k)).map(|(k, &got)| ChainBreak::Out {
                message: k,
                want: at(k),
                got,
            })
        } else if add == 0 {
            old.iter().find(|&&v| v != from).map(|&got| ChainBreak::Stray { got })
        } else {
            // Step k of the chain, for each value: (v - from) / add when it divides.
            let mut times = vec![0u64; old.len()];
            let mut stray = None;
            for &v in old {
                let d = v.wrapping_sub(from);
                match (d % add == 0).then(|| d / add).filter(|&k| k < n) {
                    Some(k) => times[k as usize] += 1,
                    None => {
                        stray.get_or_insert(ChainBreak::Stray { got: v });
                    }
                }
            }
            let count = times
                .iter()
                .position(|&t| t != 1)
                .map(|k| ChainBreak::Count { want: at(k as u64), times: times[k] });
            count.or(stray)
        };
        AtomicChain { checked: n, end: at(n), first_break }
    }
}

/// Percentiles of a latency (the unit is the field's: `latency_us`, `ack_latency_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Percentiles {
    pub samples: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl Percentiles {
    /// Of `v` (sorted here); `None` when empty.
    pub(crate) fn of(v: &mut [u64]) -> Option<Percentiles> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        // Nearest rank: the smallest value with at least p % of the samples at or below it.
        let rank = |p: u64| v[((v.len() as u64 * p).div_ceil(100) as usize).clamp(1, v.len()) - 1];
        Some(Percentiles {
            samples: v.len() as u64,
            p50: rank(50),
            p99: rank(99),
            max: v[v.len() - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round a ring: no message runs past its end, the last lap is what memory
    /// holds and what is checked, each byte against the message that wrote it last.
    #[test]
    fn a_ring_keeps_the_last_lap_and_checks_it() {
        let c = StreamContent {
            seed: 3,
            count: 100,
            sizes: Sizes::Uniform { min: 64, max: 200 },
            ring: Some(1000),
            spread: Spread::RoundRobin,
        };
        let layout: Vec<_> = c.layout().collect();
        assert!(layout.iter().all(|&(_, at, len)| at + u64::from(len) <= 1000));
        assert!(layout.iter().filter(|l| l.1 == 0).count() > 5, "it went round several times");
        let mut mem = vec![0u8; 1000];
        for &(i, at, len) in &layout {
            c.fill(i, &mut mem[at as usize..at as usize + len as usize]);
        }
        let ok = c.verify(&mem);
        assert!(ok.mismatch.is_none() && ok.digest.is_some(), "{ok:?}");
        assert!(ok.messages < 100 && ok.messages >= 5, "only the last lap shows: {}", ok.messages);
        let (i, at, _) = layout[99];
        let mut bad = mem.clone();
        bad[at as usize + 3] ^= 0xff;
        let m = c.verify(&bad).mismatch.expect("a mismatch");
        assert_eq!((m.message, m.offset), (i, at + 3));
        // A byte no message covers is nobody's.
        let last = layout.iter().map(|l| l.1 + u64::from(l.2)).max().unwrap();
        let mut tail = vec![0u8; 1000];
        tail[..mem.len()].copy_from_slice(&mem);
        tail[last as usize..].fill(0xee);
        assert!(c.verify(&tail).mismatch.is_none());
        assert_eq!(c.span(), last);
        // A region shorter than the ring: the first message past its end, no
        // matter how large the ring the order names.
        let huge = StreamContent {
            ring: Some(1 << 40),
            sizes: Sizes::Fixed(1 << 20),
            count: 1 << 20,
            ..c
        };
        let m = huge.verify(&mem).mismatch.expect("past the end");
        assert_eq!((m.message, m.offset, m.got.len()), (0, 1000, 0));
        let mut first = vec![0u8; 1 << 20];
        huge.fill(0, &mut first);
        assert_eq!(m.want, first[1000..1016].to_vec(), "the bytes it should have there");
        let flat = StreamContent { ring: None, ..huge };
        assert_eq!(flat.verify(&mem).mismatch.map(|m| (m.message, m.offset)), Some((0, 1000)));
    }

    /// Round robin deals message i to QP i mod n; at random, each QP gets its
    /// share give or take, the same on every call, and `on_qp` lists exactly the
    /// messages `qp_of` deals it.
    #[test]
    fn messages_are_dealt_to_qps_round_robin_or_at_random() {
        let rr = StreamContent {
            seed: 9,
            count: 1003,
            sizes: Sizes::Fixed(8),
            ring: None,
            spread: Spread::RoundRobin,
        };
        assert_eq!(rr.per_qp(4), vec![251, 251, 251, 250]);
        assert_eq!(rr.on_qp(2, 4).take(3).collect::<Vec<_>>(), vec![2, 6, 10]);
        let random = StreamContent { spread: Spread::Random, ..rr };
        let per = random.per_qp(4);
        assert_eq!(per.iter().sum::<u64>(), 1003);
        assert!(per.iter().all(|&c| (150..350).contains(&c)), "{per:?}");
        assert_ne!(per, rr.per_qp(4), "not round robin");
        for (q, &share) in per.iter().enumerate() {
            let mine: Vec<u64> = random.on_qp(q, 4).collect();
            assert_eq!(mine.len() as u64, share);
            assert!(mine.iter().all(|&i| random.qp_of(i, 4) == q));
        }
        let again = StreamContent { ..random };
        assert_eq!(
            (0..1003).map(|i| again.qp_of(i, 4)).collect::<Vec<_>>(),
            (0..1003).map(|i| random.qp_of(i, 4)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn content_is_the_seeds_alone_and_lies_back_to_back() {
        let c = StreamContent {
            seed: 7,
            count: 1000,
            sizes: Sizes::Uniform { min: 1, max: 300 },
            ring: None,
            spread: Spread::RoundRobin,
        };
        let again = StreamContent {
            seed: 7,
            count: 1000,
            sizes: Sizes::Uniform { min: 1, max: 300 },
            ring: None,
            spread: Spread::RoundRobin,
        };
        let lens: Vec<u32> = (0..1000).map(|i| c.len(i)).collect();
        assert!(lens.iter().all(|&l| (1..=300).contains(&l)));
        assert!(
            lens.iter().any(|&l| l < 20) && lens.iter().any(|&l| l > 280),
            "the sizes spread over the range"
        );
        assert_eq!(lens, (0..1000).map(|i| again.len(i)).collect::<Vec<_>>());
        let layout: Vec<_> = c.layout().collect();
        assert_eq!(layout[0].1, 0);
        assert_eq!(layout[1].1, u64::from(lens[0]));
        assert_eq!(c.total(), lens.iter().map(|&l| u64::from(l)).sum::<u64>());
        let (mut a, mut b) = (vec![0u8; 40], vec![0u8; 40]);
        c.fill(3, &mut a);
        c.fill(4, &mut b);
        assert_ne!(a, b, "each message its own bytes");
        let other = StreamContent { seed: 8, ..c };
        other.fill(3, &mut b);
        assert_ne!(a, b, "each seed its own bytes");
    }

    #[test]
    fn verify_names_the_first_wrong_message_its_offset_and_bytes() {
        let c = StreamContent {
            seed: 1,
            count: 100,
            sizes: Sizes::Fixed(64),
            ring: None,
            spread: Spread::RoundRobin,
        };
        let mut mem = vec![0u8; 64 * 100 + 10];
        c.write_all(&mut mem);
        let ok = c.verify(&mem);
        assert_eq!((ok.messages, ok.bytes, ok.mismatch.clone()), (100, 6400, None));
        let digest = ok.digest.clone().unwrap();
        // Message 37 lost its last 24 bytes (as if never written).
        let at = 37 * 64 + 40;
        mem[at..at + 24].fill(0);
        let bad = c.verify(&mem);
        let m = bad.mismatch.expect("a mismatch");
        assert_eq!((m.message, m.offset), (37, at as u64));
        assert_eq!(m.got, vec![0; 16]);
        let mut want = vec![0u8; 64];
        c.fill(37, &mut want);
        assert_eq!(m.want, want[40..56].to_vec());
        assert_eq!(bad.digest, None);
        // A region too short for the last message is a mismatch there too.
        let mut short = vec![0u8; 64 * 100 - 1];
        c.write_all(&mut short);
        assert_eq!(c.verify(&short).mismatch.map(|m| m.message), Some(99));
        // The same content, written again, has the same digest.
        let mut again = vec![0u8; 6400];
        c.write_all(&mut again);
        assert_eq!(c.verify(&again).digest, Some(digest));
    }

    /// One QP: message i sees from + i·add, and a CmpSwap swaps in one add more;
    /// over several QPs, any order of the same values; a doubled or lost add shows.
    #[test]
    fn atomic_old_values_chain() {
        let v = StreamVerb::Atomic { add: 3, cmp_swap_every: 4, from: 1000 };
        assert_eq!(v.atomic(0), Some(AtomicOp::FetchAdd { add: 3 }));
        assert_eq!(v.atomic(3), Some(AtomicOp::CmpSwap { compare: 1009, swap: 1012 }));
        assert_eq!(v.atomic(7), Some(AtomicOp::CmpSwap { compare: 1021, swap: 1024 }));
        assert_eq!(v.name(), "atomics");
        assert_eq!(StreamVerb::Write.atomic(0), None);
        let good: Vec<u64> = (0..10).map(|i| 1000 + 3 * i).collect();
        assert_eq!(
            AtomicChain::check(&good, 1000, 3, true),
            AtomicChain { checked: 10, end: 1030, first_break: None }
        );
        let mut shuffled = good.clone();
        shuffled.swap(2, 7);
        assert!(AtomicChain::check(&shuffled, 1000, 3, false).first_break.is_none());
        assert_eq!(
            AtomicChain::check(&shuffled, 1000, 3, true).first_break,
            Some(ChainBreak::Out { message: 2, want: 1006, got: 1021 })
        );
        // An add that ran twice: every value from there on is one add further.
        let twice: Vec<u64> = (0..10).map(|i| 1000 + 3 * i + if i > 4 { 3 } else { 0 }).collect();
        let b = AtomicChain::check(&twice, 1000, 3, false).first_break.expect("a break");
        assert_eq!(b, ChainBreak::Count { want: 1015, times: 0 });
        assert_eq!(b.to_string(), "no atomic saw the word at 1015: an add was lost or ran twice");
        let mut dup = good.clone();
        dup[9] = dup[8];
        assert_eq!(
            AtomicChain::check(&dup, 1000, 3, false).first_break,
            Some(ChainBreak::Count { want: 1024, times: 2 })
        );
        let mut stray = good;
        stray[0] = 7;
        assert_eq!(
            AtomicChain::check(&stray, 1000, 3, false).first_break,
            Some(ChainBreak::Count { want: 1000, times: 0 })
        );
        assert_eq!(AtomicChain::check(&[5, 5], 5, 0, false).first_break, None);
        assert_eq!(
            AtomicChain::check(&[5, 6], 5, 0, false).first_break,
            Some(ChainBreak::Stray { got: 6 })
        );
        // The word wraps as the device's u64 does.
        let wrap = [u64::MAX - 1, 0];
        assert_eq!(AtomicChain::check(&wrap, u64::MAX - 1, 2, true).end, 2);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(
            Percentiles::of(&mut v),
            Some(Percentiles { samples: 100, p50: 50, p99: 99, max: 100 })
        );
        assert_eq!(
            Percentiles::of(&mut [7]),
            Some(Percentiles { samples: 1, p50: 7, p99: 7, max: 7 })
        );
        assert_eq!(Percentiles::of(&mut []), None);
    }
}
