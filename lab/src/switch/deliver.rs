//! Frames leaving the switch: sent to the receiving VM, recorded in the owning
//! run's capture and live view, duplicated, or held back (`delay`, `reorder`) and
//! released when due.
//!
//! Owns: [`Held`] frames and the engine's sending, recording and releasing. Imports:
//! the engine from [`switch`](super), [`Dir`] from [`fault`](crate::fault), the frame's
//! [`Marks`] from [`mark`](crate::mark) and the live view's [`WireFrame`] from
//! [`control`](crate::control).
use std::io;
use std::thread;
use std::time::{Duration, Instant};

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

impl Engine {
    pub(super) fn record(
        &mut self,
        at: Option<usize>,
        dir: Dir,
        ts: u64,
        frame: &[u8],
        marks: &Marks,
    ) {
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

    /// Sends `frame` to the VM on the other side of `dir` and records it.
    pub(super) fn egress(
        &mut self,
        run: Option<usize>,
        dir: Dir,
        frame: &[u8],
        marks: &Marks,
        ts: u64,
    ) {
        let out = &self.socks[1 - dir.index()];
        let mut sent = out.send(frame);
        // A full send buffer clears as the kernel delivers; give it a moment.
        let until = Instant::now() + Duration::from_millis(5);
        while matches!(&sent, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            && Instant::now() < until
        {
            thread::yield_now();
            sent = out.send(frame);
        }
        match sent {
            Ok(_) => {
                self.count(run, |c| c.forwarded += 1);
                self.record(run, dir, ts, frame, marks);
            }
            Err(e) => {
                self.count(run, |c| c.send_errors += 1);
                self.record(run, dir, ts, frame, &marks.unsent(&e.to_string()));
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
    }
}
