//! Frames leaving the switch: sent to the receiving side, recorded in the owning
//! run's capture and live view, duplicated, or held back (`delay`, `reorder`) and
//! released when due. What a burst decided goes out in batches and is recorded
//! in the order it was decided ([`Outbox`]).
//!
//! Owns: [`Held`] frames, the [`Outbox`] and the engine's sending, recording and
//! releasing. Imports:
//! the engine from [`switch`](super), [`Dir`] from [`fault`](crate::fault), the frame's
//! [`Marks`] from [`mark`](crate::mark) and the live view's [`WireFrame`] from
//! [`control`](crate::control).
use std::io;
use std::thread;
use std::time::{Duration, Instant};

use super::port::SEND_BATCH;
use super::{Engine, RunId};
use crate::control::WireFrame;
use crate::fault::Dir;
use crate::mark::{Mark, Marks};
use dissector::capture::unix_now_ns;

/// A frame the switch holds back (delay, reorder).
pub(super) struct Held {
    pub(super) due: Instant,
    pub(super) dir: Dir,
    pub(super) frame: Vec<u8>,
    pub(super) marks: Marks,
    pub(super) dups: u32,
    /// Reorder: released right after the next frame in the same direction.
    pub(super) behind_next: bool,
    /// When it arrived (the clock its capture timestamps come from): the frame
    /// says how long before it was recorded ([`Mark::Arrived`]).
    pub(super) arrived_ns: u64,
    /// The run whose rule holds it.
    pub(super) run: RunId,
}

/// What the switch has decided to send and record, in the order it decided it
/// ([`Engine::flush`] carries it out): a burst's frames go out of each port in
/// one system call, and are recorded in the order they were decided, sent or
/// not, so the capture keeps the switch's order whatever the batching.
#[derive(Default)]
pub(super) struct Outbox {
    /// The frames' bytes, one after another.
    bytes: Vec<u8>,
    items: Vec<Out>,
    /// Scratch for [`Engine::flush`]: the items going out of one port, kept to
    /// spare an allocation a burst.
    sends: Vec<usize>,
}

/// One frame in the [`Outbox`].
struct Out {
    run: Option<RunId>,
    dir: Dir,
    at: std::ops::Range<usize>,
    marks: Marks,
    ts: u64,
    /// Sent to the other side of `dir`, then recorded; or only recorded (one a
    /// rule dropped or withheld).
    send: bool,
}

impl Engine {
    /// Records `frame` for run `at` (index into `runs`), in order with the
    /// frames being sent ([`Outbox`]).
    pub(super) fn record(
        &mut self,
        at: Option<usize>,
        dir: Dir,
        ts: u64,
        frame: &[u8],
        marks: &Marks,
    ) {
        self.queue(at, dir, frame, marks, ts, false);
    }

    /// Sends `frame` to the side opposite `dir`, then records it.
    pub(super) fn egress(
        &mut self,
        run: Option<usize>,
        dir: Dir,
        frame: &[u8],
        marks: &Marks,
        ts: u64,
    ) {
        self.queue(run, dir, frame, marks, ts, true);
    }

    fn queue(
        &mut self,
        at: Option<usize>,
        dir: Dir,
        frame: &[u8],
        marks: &Marks,
        ts: u64,
        send: bool,
    ) {
        let run = at.and_then(|i| self.runs.get(i)).map(|r| r.id);
        let o = &mut self.outbox;
        let from = o.bytes.len();
        o.bytes.extend_from_slice(frame);
        let at = from..o.bytes.len();
        o.items.push(Out { run, dir, at, marks: marks.clone(), ts, send });
    }

    /// Sends what the outbox holds, each port's frames in batches, then counts
    /// and records every frame in the order it was decided.
    pub(super) fn flush(&mut self) {
        if self.outbox.items.is_empty() {
            return;
        }
        let mut o = std::mem::take(&mut self.outbox);
        let mut failed: Vec<(usize, io::Error)> = Vec::new();
        for port in 0..2 {
            let mut sends = std::mem::take(&mut o.sends);
            sends.clear();
            sends.extend(
                (0..o.items.len())
                    .filter(|&i| o.items[i].send && 1 - o.items[i].dir.index() == port),
            );
            let frame = |k: usize| &o.bytes[o.items[sends[k]].at.clone()];
            failed.extend(
                send_all(&self.socks[port], sends.len(), frame)
                    .into_iter()
                    .map(|(k, e)| (sends[k], e)),
            );
            o.sends = sends;
        }
        failed.sort_by_key(|(i, _)| *i);
        let mut failed = failed.into_iter().peekable();
        for (i, out) in o.items.iter().enumerate() {
            let at = out.run.and_then(|id| self.index_of(id));
            let frame = &o.bytes[out.at.clone()];
            match failed.next_if(|(k, _)| *k == i) {
                Some((_, e)) => {
                    self.count(at, |c| c.send_errors += 1);
                    self.write_record(
                        at,
                        out.dir,
                        out.ts,
                        frame,
                        &out.marks.unsent(&e.to_string()),
                    );
                }
                None if out.send => {
                    self.count(at, |c| c.forwarded += 1);
                    self.write_record(at, out.dir, out.ts, frame, &out.marks);
                }
                None => self.write_record(at, out.dir, out.ts, frame, &out.marks),
            }
        }
        o.bytes.clear();
        o.items.clear();
        self.outbox = o;
    }

    fn write_record(&mut self, at: Option<usize>, dir: Dir, ts: u64, frame: &[u8], marks: &Marks) {
        let Some(run) = at.and_then(|i| self.runs.get_mut(i)) else { return };
        let comment = marks.comment();
        let comment = comment.as_deref();
        if let Some(live) = &run.live {
            let w = WireFrame {
                sender: dir,
                ts_ns: ts,
                comment: comment.map(str::to_string),
                data: frame.to_vec(),
            };
            if live.try_send(w).is_err() {
                run.live_skipped += 1;
            }
        }
        let Some(rec) = &mut run.recorder else { return };
        match rec.record(dir, ts, frame, comment) {
            Ok(()) => self.count(at, |c| c.recorded += 1),
            Err(e) => {
                run.capture_error.get_or_insert(format!("writing the capture: {e}"));
                self.count(at, |c| c.record_errors += 1);
            }
        }
    }

    /// Forwards an untouched frame and lets a reordered one follow it.
    pub(super) fn forward(&mut self, run: Option<usize>, dir: Dir, data: &[u8], ts: u64) {
        self.egress(run, dir, data, &Marks::default(), ts);
        self.release_reordered(dir);
    }

    pub(super) fn deliver(
        &mut self,
        run: Option<usize>,
        dir: Dir,
        frame: &[u8],
        marks: &Marks,
        dups: u32,
        ts: u64,
    ) {
        self.egress(run, dir, frame, marks, ts);
        for k in 1..=dups {
            self.count(run, |c| c.duplicated += 1);
            let copy = Marks(vec![Mark::Duplicate { k, of: dups, original: marks.0.clone() }]);
            self.egress(run, dir, frame, &copy, unix_now_ns());
        }
    }

    /// A held frame goes on, recorded now with when it arrived: the capture keeps
    /// its sender's order, which the go-back-N judge goes by.
    fn release(&mut self, h: Held) {
        let run = self.index_of(h.run);
        let now = unix_now_ns();
        let mut marks = h.marks;
        marks.0.push(Mark::Arrived { ns_before: now.saturating_sub(h.arrived_ns) });
        self.deliver(run, h.dir, &h.frame, &marks, h.dups, now);
    }

    /// A frame held by `reorder` in direction `dir` goes out now that another frame
    /// has passed it.
    pub(super) fn release_reordered(&mut self, dir: Dir) {
        if self.held.is_empty() {
            return;
        }
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].behind_next && self.held[i].dir == dir {
                if let Some(h) = self.held.remove(i) {
                    self.release(h);
                }
            } else {
                i += 1;
            }
        }
    }

    /// Delivers held frames whose time has come (all of them with `all`).
    pub(super) fn release_due(&mut self, all: bool) {
        if self.held.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut i = 0;
        while i < self.held.len() {
            if all || self.held[i].due <= now {
                if let Some(h) = self.held.remove(i) {
                    self.release(h);
                }
            } else {
                i += 1;
            }
        }
        self.flush();
    }
}

/// Sends `n` frames (`frame(k)` the k-th) out of `port` in order, a batch a
/// system call: which of them could not be sent, and why. A full send buffer
/// clears as the kernel delivers: a frame is given 5 ms of retrying (an
/// interrupted call included) before it counts as not sent.
fn send_all<'f>(
    port: &super::Port,
    n: usize,
    frame: impl Fn(usize) -> &'f [u8],
) -> Vec<(usize, io::Error)> {
    const GRACE: Duration = Duration::from_millis(5);
    let mut failed = Vec::new();
    let mut batch: [&[u8]; SEND_BATCH] = [&[]; SEND_BATCH];
    let (mut i, mut until) = (0, Instant::now() + GRACE);
    while i < n {
        let len = (n - i).min(SEND_BATCH);
        for (k, slot) in batch[..len].iter_mut().enumerate() {
            *slot = frame(i + k);
        }
        match port.send_batch(&batch[..len]) {
            Ok(sent) => {
                i += sent;
                until = Instant::now() + GRACE;
            }
            Err(e)
                if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock)
                    && Instant::now() < until =>
            {
                thread::yield_now();
            }
            Err(e) => {
                failed.push((i, e));
                i += 1;
                until = Instant::now() + GRACE;
            }
        }
    }
    failed
}
