//! `-j N`: a capture file read and worked on by N threads, the results used in
//! frame order on the calling thread.
//!
//! Each worker takes its turn at the reader (a mutex): it fills a [`Chunk`] (a few
//! thousand records and their bytes), lets go of the reader and turns the chunk
//! into a result `R` (rendered lines, column values, flow facts) while another
//! worker reads the next one. Reading is about a fifth of the work: taking turns
//! spreads it over the workers, where a reader thread of its own would be one more
//! thread than there are cores, stalling every worker whenever it is descheduled.
//! The calling thread consumes the results strictly in chunk order, so whatever it
//! does with them — write them out, feed a sequential analysis — happens exactly
//! as in one pass over the file. Chunks and results travel as pairs through a
//! fixed pool and come back once consumed: memory is bounded and nothing is
//! allocated per chunk once the buffers have grown.
//!
//! A capture error ends the stream after the records read before it, and is
//! returned once every chunk before it has been consumed: the caller reports it
//! after the frames before the damage, as a single pass would. A worker that
//! panics ends the run with an error; a consumer that fails (a closed pipe) stops
//! the workers.
//!
//! Owns: the pipeline. Imports: the capture chunk, and `super::Error`.
use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Mutex;

use anyhow::anyhow;
use dissector::capture::{CaptureError, Carry, Chunk, Filled, PacketSource};

use super::Error;

/// How to cut and share out the work.
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    /// Records per chunk (at least 1).
    pub chunk_frames: usize,
    /// Stop after this many records (`-c`).
    pub limit: u64,
}

/// A chunk on its way: its records, the result made of them, and how reading
/// stopped.
struct Job<R> {
    chunk: Chunk,
    out: R,
    filled: Filled,
}

/// What a worker sends back: a job done, or the message of its panic.
type Done<R> = Result<Job<R>, String>;

/// The source and where reading it stands, shared by the workers.
struct Reading<'s, S> {
    src: &'s mut S,
    plan: Plan,
    carry: Option<Carry>,
    read: u64,
    /// The last chunk was read: the workers stop.
    over: bool,
}

impl<S: PacketSource> Reading<'_, S> {
    /// Fills `chunk` with the next records, or `None` once the last chunk was read.
    fn next(&mut self, chunk: &mut Chunk) -> Option<Filled> {
        if self.over {
            return None;
        }
        let max = (self.plan.chunk_frames.max(1) as u64).min(self.plan.limit - self.read) as usize;
        let mut filled = chunk.fill(self.src, max, self.carry);
        self.read += chunk.len() as u64;
        if self.read == self.plan.limit {
            filled = match filled {
                Filled::Full => Filled::End,
                other => other,
            };
        }
        self.carry = Some(chunk.carry());
        self.over = filled.is_last();
        Some(filled)
    }
}

/// Runs the pipeline over `src` with one thread per worker (a function turning a
/// chunk into its result, with its own state); `consume` takes the results in
/// order. Returns the capture error that ended the stream, if any, once every
/// record before it was consumed.
pub(super) fn run<S, R, W>(
    src: &mut S,
    plan: Plan,
    workers: Vec<W>,
    mut consume: impl FnMut(&Chunk, &mut R) -> Result<(), Error>,
) -> Result<Option<CaptureError>, Error>
where
    S: PacketSource + Send,
    R: Default + Send,
    W: FnMut(&Chunk, &mut R) + Send,
{
    let jobs = workers.len();
    if jobs == 0 {
        return Err(Error::environment(anyhow!("no worker threads")));
    }
    let (free_tx, free_rx) = mpsc::channel::<(Chunk, R)>();
    let (done_tx, done_rx) = mpsc::channel::<Done<R>>();
    // Enough pairs that every worker has one in hand and one done, waiting for its
    // turn to be consumed.
    for _ in 0..2 * jobs + 2 {
        let _ = free_tx.send((Chunk::new(), R::default()));
    }
    let free_rx = Mutex::new(free_rx);
    let reading = Mutex::new(Reading { src, plan, carry: None, read: 0, over: false });
    std::thread::scope(|s| {
        for mut w in workers {
            let (done_tx, free_rx, reading) = (done_tx.clone(), &free_rx, &reading);
            s.spawn(move || {
                let r = panic::catch_unwind(AssertUnwindSafe(|| {
                    // The pool is gone when the consumer stopped; the reader is
                    // poisoned when another worker panicked while reading.
                    loop {
                        let Ok(Ok((mut chunk, mut out))) = free_rx.lock().map(|rx| rx.recv())
                        else {
                            return;
                        };
                        let Some(filled) = reading.lock().ok().and_then(|mut r| r.next(&mut chunk))
                        else {
                            return;
                        };
                        w(&chunk, &mut out);
                        if done_tx.send(Ok(Job { chunk, out, filled })).is_err() {
                            return;
                        }
                    }
                }));
                if let Err(p) = r {
                    let _ =
                        done_tx.send(Err(format!("a worker thread failed: {}", panic_text(&*p))));
                }
            });
        }
        drop(done_tx);
        in_order(done_rx, free_tx, &mut consume)
    })
}

/// The calling thread: results in chunk order to `consume`, their pairs back to
/// the pool.
fn in_order<R>(
    done: Receiver<Done<R>>,
    free: Sender<(Chunk, R)>,
    consume: &mut impl FnMut(&Chunk, &mut R) -> Result<(), Error>,
) -> Result<Option<CaptureError>, Error> {
    let mut waiting: BTreeMap<u64, Job<R>> = BTreeMap::new();
    let mut next = 0u64;
    loop {
        while let Some(mut job) = waiting.remove(&next) {
            consume(&job.chunk, &mut job.out)?;
            next += 1;
            match job.filled {
                Filled::Full => {}
                Filled::End => return Ok(None),
                Filled::Failed(e) => return Ok(Some(e)),
            }
            // The reader is gone once it has read the last chunk.
            let _ = free.send((job.chunk, job.out));
        }
        match done.recv() {
            Ok(Ok(job)) => {
                waiting.insert(job.chunk.seq, job);
            }
            Ok(Err(msg)) => return Err(Error::environment(anyhow!("{msg}"))),
            Err(_) => {
                return Err(Error::environment(anyhow!(
                    "the worker threads stopped before the end of the capture"
                )))
            }
        }
    }
}

/// The message a panic was raised with.
fn panic_text(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("panicked")
}

#[cfg(test)]
mod tests {
    use super::*;
    use dissector::capture::{ErrorKind, Record};
    use dissector::LinkType;

    /// `n` one-byte records, then an error (`fail`) or the end.
    struct Src {
        n: u64,
        at: u64,
        fail: bool,
        byte: [u8; 1],
    }

    impl PacketSource for Src {
        fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
            if self.at == self.n {
                return if self.fail {
                    Err(CaptureError::new(ErrorKind::Corrupt { what: "bad".into() })
                        .in_frame(self.n + 1))
                } else {
                    Ok(None)
                };
            }
            self.at += 1;
            self.byte = [self.at as u8];
            Ok(Some(Record {
                number: self.at,
                ts_ns: self.at,
                link: LinkType::ETHERNET,
                interface: 0,
                orig_len: 1,
                data: &self.byte,
                file_offset: 0,
                direction: None,
                comment: None,
            }))
        }
    }

    fn numbers(n: u64, fail: bool, plan: Plan) -> (Vec<u64>, Option<CaptureError>) {
        let mut src = Src { n, at: 0, fail, byte: [0] };
        let mut seen = Vec::new();
        let worker = |c: &Chunk, out: &mut Vec<u64>| {
            out.clear();
            // Uneven work, so that chunks finish out of order.
            if c.seq.is_multiple_of(3) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            out.extend(c.records().map(|(r, _)| r.number));
        };
        let e = run(&mut src, plan, vec![worker; 4], |_, out: &mut Vec<u64>| {
            seen.extend_from_slice(out);
            Ok(())
        })
        .unwrap();
        (seen, e)
    }

    #[test]
    fn results_come_in_order_up_to_the_error_and_the_count() {
        let plan = Plan { chunk_frames: 3, limit: u64::MAX };
        let (seen, e) = numbers(100, false, plan);
        assert_eq!(seen, (1..=100).collect::<Vec<_>>());
        assert!(e.is_none());
        let (seen, e) = numbers(10, true, plan);
        assert_eq!(seen, (1..=10).collect::<Vec<_>>());
        assert_eq!(e.and_then(|e| e.frame()), Some(11));
        let (seen, e) = numbers(100, true, Plan { limit: 7, ..plan });
        assert_eq!(seen, (1..=7).collect::<Vec<_>>());
        assert!(e.is_none(), "-c stops before the damage");
        let (seen, _) = numbers(0, false, plan);
        assert!(seen.is_empty());
    }

    #[test]
    fn a_panicking_worker_is_an_error_not_a_hang() {
        let mut src = Src { n: 50, at: 0, fail: false, byte: [0] };
        let plan = Plan { chunk_frames: 2, limit: u64::MAX };
        let worker = |c: &Chunk, _: &mut ()| {
            if c.seq == 3 {
                panic!("boom");
            }
        };
        let e = run(&mut src, plan, vec![worker; 2], |_, _| Ok(())).unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
    }

    /// Panics when asked for record `at`.
    struct Bomb {
        at: u64,
        inner: Src,
    }

    impl PacketSource for Bomb {
        fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
            assert!(self.inner.at + 1 != self.at, "the source broke");
            self.inner.next_packet()
        }
    }

    #[test]
    fn a_source_that_panics_is_an_error_not_a_hang() {
        let mut src = Bomb { at: 20, inner: Src { n: 50, at: 0, fail: false, byte: [0] } };
        let plan = Plan { chunk_frames: 3, limit: u64::MAX };
        let worker = |_: &Chunk, _: &mut ()| {};
        let mut consumed = 0;
        let e = run(&mut src, plan, vec![worker; 3], |c, _| {
            consumed += c.len();
            Ok(())
        })
        .unwrap_err();
        assert!(e.to_string().contains("the source broke"), "{e}");
        assert!(consumed < 20, "nothing from the broken chunk on: {consumed}");
    }

    #[test]
    fn a_failing_consumer_stops_the_threads() {
        let mut src = Src { n: 10_000, at: 0, fail: false, byte: [0] };
        let plan = Plan { chunk_frames: 5, limit: u64::MAX };
        let worker = |_: &Chunk, _: &mut ()| {};
        let mut n = 0;
        let e = run(&mut src, plan, vec![worker; 2], |_, _| {
            n += 1;
            if n == 3 {
                return Err(Error::environment(anyhow!("closed")));
            }
            Ok(())
        })
        .unwrap_err();
        assert!(e.to_string().contains("closed"));
        assert!(src.at < 10_000, "the reader stopped early");
    }
}
