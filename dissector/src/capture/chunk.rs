//! [`Chunk`]: a batch of records read from any [`PacketSource`], owning their bytes,
//! so that one thread can read a capture while others decode what it read.
//!
//! A chunk keeps one byte buffer and, per record, its number, times, length,
//! interface, direction, file offset and where its bytes and comment lie in the
//! buffer. [`Chunk::fill`] clears and refills it, reusing both allocations: a
//! reader that recycles its chunks allocates nothing per chunk once they have
//! grown to the size of the largest batch. [`Chunk::records`] hands the records
//! back as the [`Record`]s the source gave.
//!
//! The times that make a frame's `frame.time_relative` and `frame.time_delta` —
//! the first frame's timestamp and the previous frame's — are carried with the
//! chunk ([`Chunk::first_ts_ns`], [`Chunk::prev_ts_ns`]), so a chunk is decoded
//! exactly as it would be in one pass over the file.
//!
//! Owns: the batch. Imports: the record, the source trait and the capture error (its
//! parent), and the link type.
use std::ops::Range;

use super::{CaptureError, Direction, PacketSource, Record};
use crate::LinkType;

/// What is kept of one record; its bytes are in the chunk's buffer.
#[derive(Debug, Clone)]
struct Meta {
    data: Range<usize>,
    ts_ns: u64,
    orig_len: u32,
    number: u64,
    interface: u32,
    file_offset: u64,
    link: LinkType,
    direction: Option<Direction>,
    comment: Option<Range<usize>>,
}

/// How [`Chunk::fill`] stopped.
#[derive(Debug)]
pub enum Filled {
    /// The chunk holds as many records as it was asked for; the source may have
    /// more.
    Full,
    /// The source ended (or the count asked for was reached with this chunk).
    End,
    /// Reading failed after the records the chunk holds: they come before the
    /// error, which keeps its byte offset and frame number.
    Failed(CaptureError),
}

impl Filled {
    /// Whether the source has nothing more to give after this chunk.
    pub fn is_last(&self) -> bool {
        !matches!(self, Filled::Full)
    }
}

/// What a chunk passes to the next one filled from the same source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carry {
    seq: u64,
    first_ts_ns: u64,
    last_ts_ns: u64,
}

/// A batch of records with their bytes (see the module docs).
#[derive(Debug, Default)]
pub struct Chunk {
    /// 0 for a source's first chunk, then 1, 2, …
    pub seq: u64,
    /// The timestamp of the capture's first frame.
    pub first_ts_ns: u64,
    /// The timestamp of the frame before this chunk's first one (that frame's own
    /// for the capture's first chunk: a delta of 0, as tshark shows).
    pub prev_ts_ns: u64,
    bytes: Vec<u8>,
    meta: Vec<Meta>,
}

impl Chunk {
    /// An empty chunk.
    pub fn new() -> Chunk {
        Chunk::default()
    }

    /// Number of records held.
    pub fn len(&self) -> usize {
        self.meta.len()
    }

    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// The timestamp of the last record held, if any.
    pub fn last_ts_ns(&self) -> Option<u64> {
        self.meta.last().map(|m| m.ts_ns)
    }

    /// Replaces the chunk's records by at most `max` records from `src`. `prev`
    /// is the chunk filled before this one from the same source (`None` for the
    /// first): its sequence number and last timestamp carry over.
    pub fn fill(
        &mut self,
        src: &mut (impl PacketSource + ?Sized),
        max: usize,
        prev: Option<Carry>,
    ) -> Filled {
        self.bytes.clear();
        self.meta.clear();
        let (seq, first_ts, prev_ts) = match prev {
            Some(c) => (c.seq + 1, Some(c.first_ts_ns), Some(c.last_ts_ns)),
            None => (0, None, None),
        };
        self.seq = seq;
        let mut filled = Filled::Full;
        while self.meta.len() < max {
            match src.next_packet() {
                // By reference: moving the record out copies it with wide loads
                // that stall on the narrower stores that built it.
                Ok(Some(ref r)) => self.push(r),
                Ok(None) => {
                    filled = Filled::End;
                    break;
                }
                Err(e) => {
                    filled = Filled::Failed(e);
                    break;
                }
            }
        }
        let own_first = self.meta.first().map_or(0, |m| m.ts_ns);
        self.first_ts_ns = first_ts.unwrap_or(own_first);
        self.prev_ts_ns = prev_ts.unwrap_or(own_first);
        filled
    }

    /// Appends a copy of `r`.
    #[inline(always)]
    fn push(&mut self, r: &Record<'_>) {
        // The record's fields first, the bytes after: read after the copy, the
        // fields wait for all its stores (a wide read cannot take them from the
        // narrower stores that made the record).
        let at = self.bytes.len();
        let end = at + r.data.len();
        self.meta.push(Meta {
            number: r.number,
            ts_ns: r.ts_ns,
            link: r.link,
            interface: r.interface,
            orig_len: r.orig_len,
            file_offset: r.file_offset,
            direction: r.direction,
            data: at..end,
            comment: r.comment.map(|c| end..end + c.len()),
        });
        self.bytes.extend_from_slice(r.data);
        if let Some(c) = r.comment {
            self.bytes.extend_from_slice(c.as_bytes());
        }
    }

    /// What the next chunk from the same source needs from this one (see
    /// [`Chunk::fill`]).
    pub fn carry(&self) -> Carry {
        Carry {
            seq: self.seq,
            first_ts_ns: self.first_ts_ns,
            last_ts_ns: self.last_ts_ns().unwrap_or(self.prev_ts_ns),
        }
    }

    /// A record, as the source gave it.
    fn record(&self, m: &Meta) -> Record<'_> {
        Record {
            number: m.number,
            ts_ns: m.ts_ns,
            link: m.link,
            interface: m.interface,
            orig_len: m.orig_len,
            data: &self.bytes[m.data.clone()],
            file_offset: m.file_offset,
            direction: m.direction,
            // Copied from a `&str`: still valid UTF-8.
            comment: m.comment.clone().and_then(|c| std::str::from_utf8(&self.bytes[c]).ok()),
        }
    }

    /// The records in order, each with the timestamp of the frame before it (the
    /// first record of the capture is its own previous frame).
    pub fn records(&self) -> impl Iterator<Item = (Record<'_>, u64)> + '_ {
        let mut prev = self.prev_ts_ns;
        self.meta.iter().map(move |m| {
            let p = prev;
            prev = m.ts_ns;
            (self.record(m), p)
        })
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::capture::ErrorKind;

    /// Gives `n` records, then an error.
    struct Src {
        n: u64,
        at: u64,
        buf: Vec<u8>,
    }

    impl PacketSource for Src {
        fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
            if self.at == self.n {
                return Err(CaptureError::new(ErrorKind::Corrupt { what: "end".into() })
                    .at(99)
                    .in_frame(self.n + 1));
            }
            self.at += 1;
            self.buf = vec![self.at as u8; self.at as usize];
            Ok(Some(Record {
                number: self.at,
                ts_ns: 1000 * self.at,
                link: LinkType::ETHERNET,
                interface: 0,
                orig_len: 60,
                data: &self.buf,
                file_offset: 24,
                direction: None,
                comment: (self.at == 2).then_some("two"),
            }))
        }
    }

    #[test]
    fn chunks_carry_times_and_keep_the_error_after_their_records() {
        let mut src = Src { n: 5, at: 0, buf: Vec::new() };
        let mut c = Chunk::new();
        assert!(matches!(c.fill(&mut src, 3, None), Filled::Full));
        let recs: Vec<_> = c
            .records()
            .map(|(r, p)| (r.number, r.data.to_vec(), r.comment.map(str::to_string), p))
            .collect();
        assert_eq!(recs[0], (1, vec![1], None, 1000), "the first frame is its own previous one");
        assert_eq!(recs[1], (2, vec![2, 2], Some("two".into()), 1000));
        assert_eq!(recs[2].3, 2000);
        let carry = c.carry();
        assert!(
            matches!(c.fill(&mut src, 3, Some(carry)), Filled::Failed(e) if e.frame() == Some(6) && e.offset() == Some(99))
        );
        assert_eq!((c.seq, c.first_ts_ns, c.len()), (1, 1000, 2));
        assert_eq!(
            c.records().map(|(r, p)| (r.number, p)).collect::<Vec<_>>(),
            [(4, 3000), (5, 4000)]
        );
    }
}
