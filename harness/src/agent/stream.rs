//! Streams of work requests (`op = "stream"`): what the controller orders, the
//! bytes every message carries, and what the agent reports back.
//!
//! A stream's content is a function of its seed alone: message `i` has a length
//! drawn from the stream's sizes and bytes drawn from `(seed, i)`, and the messages
//! lie back to back from the stream's offset. So the target's memory is checked on
//! the endpoint that holds it ([`Content::verify`]), message by message, and only
//! the verdict crosses the agent protocol, never the memory.
use serde::{Deserialize, Serialize};


/// How long each message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Sizes {
    Fixed(u32),
    /// Uniform in `min..=max`, drawn from the seed.
    Uniform { min: u32, max: u32 },
}

/// What a stream's messages hold and where each lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Content {
    pub seed: u64,
    pub count: u64,
    pub sizes: Sizes,
}

/// splitmix64: one step of a small, fast, well-mixed generator.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Content {
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
            let at = off;
            off += u64::from(len);
            (i, at, len)
        })
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
        let first = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(got.len().min(want.len()));
        let end = (first + SHOWN).min(want.len());
        Some(Mismatch { message: i, offset: first as u64, want: want.get(first..end).unwrap_or(&[]).to_vec(), got: got.get(first..(first + SHOWN).min(got.len())).unwrap_or(&[]).to_vec() })
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
        let mut want = Vec::new();
        let mut digest = 0xcbf2_9ce4_8422_2325u64;
        for (i, at, len) in self.layout() {
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
        Verification { messages: self.count, bytes: self.total(), digest: Some(format!("{digest:016x}")), mismatch: None }
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
    /// Every message adds `add` to the one word at the remote offset; each old
    /// value lands in the next 8 bytes of the local MR.
    FetchAdd { add: u64 },
    /// Local source → the peer's receives, which it keeps posted and checks as
    /// each message arrives.
    Send,
    /// The peer's side of a SEND stream.
    Receive,
}

impl StreamVerb {
    pub(crate) fn name(self) -> &'static str {
        match self {
            StreamVerb::Write => "write",
            StreamVerb::Read => "read",
            StreamVerb::FetchAdd { .. } => "fetch_add",
            StreamVerb::Send => "send",
            StreamVerb::Receive => "receive",
        }
    }
}

/// Percentiles of a latency, in microseconds.
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
        Some(Percentiles { samples: v.len() as u64, p50: rank(50), p99: rank(99), max: v[v.len() - 1] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_the_seeds_alone_and_lies_back_to_back() {
        let c = Content { seed: 7, count: 1000, sizes: Sizes::Uniform { min: 1, max: 300 } };
        let again = Content { seed: 7, count: 1000, sizes: Sizes::Uniform { min: 1, max: 300 } };
        let lens: Vec<u32> = (0..1000).map(|i| c.len(i)).collect();
        assert!(lens.iter().all(|&l| (1..=300).contains(&l)));
        assert!(lens.iter().any(|&l| l < 20) && lens.iter().any(|&l| l > 280), "the sizes spread over the range");
        assert_eq!(lens, (0..1000).map(|i| again.len(i)).collect::<Vec<_>>());
        let layout: Vec<_> = c.layout().collect();
        assert_eq!(layout[0].1, 0);
        assert_eq!(layout[1].1, u64::from(lens[0]));
        assert_eq!(c.total(), lens.iter().map(|&l| u64::from(l)).sum::<u64>());
        let (mut a, mut b) = (vec![0u8; 40], vec![0u8; 40]);
        c.fill(3, &mut a);
        c.fill(4, &mut b);
        assert_ne!(a, b, "each message its own bytes");
        let other = Content { seed: 8, ..c };
        other.fill(3, &mut b);
        assert_ne!(a, b, "each seed its own bytes");
    }

    #[test]
    fn verify_names_the_first_wrong_message_its_offset_and_bytes() {
        let c = Content { seed: 1, count: 100, sizes: Sizes::Fixed(64) };
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

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(Percentiles::of(&mut v), Some(Percentiles { samples: 100, p50: 50, p99: 99, max: 100 }));
        assert_eq!(Percentiles::of(&mut [7]), Some(Percentiles { samples: 1, p50: 7, p99: 7, max: 7 }));
        assert_eq!(Percentiles::of(&mut []), None);
    }
}
