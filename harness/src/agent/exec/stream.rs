//! Streams on the endpoint (`Action::Stream`, `Action::Receive`): the sending side
//! posts a stream's messages round robin over its QPs within its window and
//! polls them to completion; the receiving side keeps receives posted and checks
//! each message as it lands. What a stream is (its content, sizes, verbs) is the
//! protocol's vocabulary ([`crate::protocol::stream`]); this is its execution.
//!
//! Owns: posting and polling a stream, its `wr_id` tags, the wait on an idle CQ,
//! and the report the agent sends back. Imports: the executor's state ([`super`]),
//! the protocol's stream orders and reports, the verbs layer.
use std::collections::VecDeque;
use std::iter::Peekable;
use std::time::{Duration, Instant};

use rdma_sys::{ibv_send_flags, ibv_wr_opcode};

use super::{err, AgentError, AgentResult, Local};
use crate::protocol::stream::{AtomicChain, AtomicOp, Mismatch, Percentiles, StreamVerb};
use crate::protocol::{ReceiveOrder, StreamOrder, StreamReport, Wc};
use crate::verbs::{Completion, Mr, Qp, Remote, Rts, SendWr, Sge};
use crate::vocab::WcStatus;

impl Local {
    /// Posts a stream's messages round robin over its QPs, never more than its
    /// window outstanding, and polls until every one has completed, one failed
    /// (posting stops; what was posted is flushed), or its time ran out.
    /// Completions of other work requests that come meanwhile are kept as usual.
    pub(super) fn stream(&mut self, o: &StreamOrder) -> AgentResult<StreamReport> {
        if o.qps.is_empty() || o.window == 0 || o.signal_every == 0 {
            return err(format!("stream `{}`: no QP, or a window or signal_every of 0", o.id));
        }
        let local = self.stream_region(o)?;
        let lanes =
            o.qps.iter().map(|name| self.stream_lane(o, name)).collect::<AgentResult<_>>()?;
        let mut run = Sending::new(o, local, lanes);
        let others = run.drive(self)?;
        let report = run.report(self);
        self.keep_completions(others, &report);
        Ok(report)
    }

    /// The MR a stream works in, checked to hold it; a source laid out back to
    /// back is written into it here, once.
    fn stream_region(&self, o: &StreamOrder) -> AgentResult<&Mr> {
        let c = &o.content;
        let total = c.total();
        let local = self
            .mrs
            .get(&o.local_mr)
            .ok_or_else(|| AgentError::from(format!("no MR `{}` on this endpoint", o.local_mr)))?;
        let span = if let StreamVerb::Atomic { .. } = o.verb { 8 * c.count } else { c.span() };
        if o.local_offset.saturating_add(span) > local.len() as u64 {
            return err(format!(
                "stream `{}`: {span} bytes from offset {} run past the end of MR `{}` ({} bytes)",
                o.id,
                o.local_offset,
                o.local_mr,
                local.len()
            ));
        }
        // A source laid out back to back is written once; one round a ring, each
        // message just before it is posted (the window keeps the one it replaces
        // completed).
        if sends_from_region(o.verb) && c.ring.is_none() {
            let mut src = vec![0u8; total as usize];
            c.write_all(&mut src);
            local.write_at(o.local_offset as usize, &src);
        }
        Ok(local)
    }

    /// The stream's QP `name`: connected, with the peer's address and rkey its
    /// verb needs (none for a SEND), and its send queue's depth.
    fn stream_lane(&self, o: &StreamOrder, name: &str) -> AgentResult<Lane<'_>> {
        let q = self.qp(name)?;
        let (addr, rkey) = match &o.remote {
            Some(r) => q.remote(r)?,
            None if o.verb == StreamVerb::Send => (0, 0),
            None => {
                return err(format!(
                    "stream `{}`: a {} stream needs the peer's MR",
                    o.id,
                    o.verb.name()
                ))
            }
        };
        let qp = q.connected()?;
        Ok(Lane { qp, addr, rkey, depth: u64::from(q.setup.caps.max_send_wr.max(1)) })
    }

    /// The receiving side of a SEND or WRITE-with-immediate stream: keeps `depth`
    /// receives posted on each QP, reposting once no more than `low_water` are
    /// left, and checks each message as it arrives (in order on its QP) against
    /// what the seed says: a SEND's bytes, a WRITE's immediate (its index).
    pub(super) fn receive(&mut self, o: &ReceiveOrder) -> AgentResult<StreamReport> {
        if o.qps.is_empty() || o.depth == 0 || o.low_water >= o.depth {
            return err(format!(
                "receives of `{}`: no QP, a depth of 0, or a low water mark not below it",
                o.id
            ));
        }
        let mr = self.receive_region(o)?;
        let qps =
            o.qps.iter().map(|name| self.qp(name)?.connected()).collect::<AgentResult<_>>()?;
        let mut run = Receiving::new(o, mr, qps);
        let others = run.drive(self)?;
        let report = run.report(self);
        self.keep_completions(others, &report);
        Ok(report)
    }

    /// The MR a receive stream's SENDs land in (none for WRITEs with immediate),
    /// checked to hold `depth` slots of its largest message for each of its QPs.
    fn receive_region(&self, o: &ReceiveOrder) -> AgentResult<Option<&Mr>> {
        let Some(name) = &o.mr else { return Ok(None) };
        let slot = u64::from(o.content.max_len());
        let mr = self
            .mrs
            .get(name)
            .ok_or_else(|| AgentError::from(format!("no MR `{name}` on this endpoint")))?;
        let need = slot * u64::from(o.depth) * o.qps.len() as u64;
        if o.offset.saturating_add(need) > mr.len() as u64 {
            return err(format!("receives of `{}`: {} slots of {slot} bytes from offset {} run past the end of MR `{name}`", o.id, o.depth as usize * o.qps.len(), o.offset));
        }
        Ok(Some(mr))
    }

    /// Keeps what a stream polled besides its own completions, then its first
    /// error: a completion like any other, for `[[expect.completion]]`.
    fn keep_completions(&mut self, others: Vec<(Completion, f64)>, report: &StreamReport) {
        let others: Vec<Wc> = others.into_iter().map(|(w, t)| self.wc(w, t)).collect();
        self.wcs.extend(others);
        self.wcs.extend(report.failed.clone());
    }
}

/// Whether a stream of `verb` sends from its local region (so writes its source
/// there), rather than receiving into it.
fn sends_from_region(verb: StreamVerb) -> bool {
    matches!(verb, StreamVerb::Write | StreamVerb::Send | StreamVerb::WriteImm)
}

/// One QP of a stream, as its sender posts on it.
#[derive(Clone, Copy)]
struct Lane<'a> {
    qp: &'a Qp<Rts>,
    /// The peer's address and rkey for this stream (0 for a SEND).
    addr: u64,
    rkey: u32,
    /// Its send queue's depth: no more than this outstanding on it.
    depth: u64,
}

/// A stream being sent: what it posts from and on, and how far each QP got.
struct Sending<'a> {
    o: &'a StreamOrder,
    local: &'a Mr,
    /// The stream's start in `local`, and its lkey.
    base: u64,
    lkey: u32,
    lanes: Vec<Lane<'a>>,
    /// A ring: each message is written just before it is posted, from `message`.
    fill_each: bool,
    message: Vec<u8>,
    /// Per QP: how many messages it carries.
    per: Vec<u64>,
    /// Per QP: how many posted, how many completed, and the signalled ones in
    /// flight with when they were posted.
    posted: Vec<u64>,
    done: Vec<u64>,
    flying: Vec<VecDeque<(u64, Instant)>>,
    /// Per QP: whether a completion failed (the QP is in error from there).
    broken: Vec<bool>,
    outstanding: u64,
    completed: u64,
    latency: Vec<u64>,
    failed: Option<Completion>,
    post_ns: u64,
    /// From the first post to the last completion, once driven.
    elapsed_us: u64,
    timed_out: bool,
}

impl<'a> Sending<'a> {
    /// A stream of `o` from `local` over `lanes`, nothing posted yet.
    fn new(o: &'a StreamOrder, local: &'a Mr, lanes: Vec<Lane<'a>>) -> Self {
        let n = lanes.len();
        Sending {
            o,
            local,
            base: local.addr() + o.local_offset,
            lkey: local.lkey(),
            fill_each: o.content.ring.is_some() && sends_from_region(o.verb),
            message: Vec::new(),
            per: o.content.per_qp(n as u64),
            posted: vec![0; n],
            done: vec![0; n],
            flying: vec![VecDeque::new(); n],
            broken: vec![false; n],
            outstanding: 0,
            completed: 0,
            latency: Vec::new(),
            failed: None,
            post_ns: 0,
            elapsed_us: 0,
            timed_out: false,
            lanes,
        }
    }

    /// Posts and polls until every message completed, one failed and what was
    /// posted is flushed, or the stream's time ran out; returns the completions
    /// of other work requests that came meanwhile (with when, in ms).
    fn drive(&mut self, ep: &Local) -> AgentResult<Vec<(Completion, f64)>> {
        let o = self.o;
        let mut layout = o.content.layout().peekable();
        let started = Instant::now();
        let until = started + Duration::from_millis(o.within_ms);
        let mut last = started;
        let mut idle = Idle::default();
        let mut others = Vec::new();
        loop {
            self.post_window(&mut layout)?;
            if self.completed == o.content.count || (self.failed.is_some() && self.outstanding == 0)
            {
                break;
            }
            if Instant::now() >= until {
                self.timed_out = true;
                break;
            }
            let got = ep.cq.poll(64)?;
            if got.is_empty() {
                idle.wait();
                continue;
            }
            idle = Idle::default();
            let now = Instant::now();
            for w in got {
                let Some((q, seq)) = from_stream_wr_id(w.wr_id, self.lanes.len()) else {
                    others.push((w, ep.started.elapsed().as_secs_f64() * 1000.0));
                    continue;
                };
                last = now;
                self.complete(q, seq, w, now);
            }
        }
        self.elapsed_us = last.duration_since(started).as_micros() as u64;
        Ok(others)
    }

    /// Posts the next messages in `layout` (index, offset, length) while the
    /// window has room, no completion failed, and the next message's QP has room
    /// on its send queue.
    fn post_window(
        &mut self,
        layout: &mut Peekable<impl Iterator<Item = (u64, u64, u32)>>,
    ) -> AgentResult<()> {
        let n = self.lanes.len() as u64;
        while self.failed.is_none() && self.outstanding < u64::from(self.o.window) {
            let Some(&(i, at, len)) = layout.peek() else { break };
            let q = self.o.content.qp_of(i, n);
            // Its QP's send queue is full (the QP is behind, recovering a
            // loss): wait for it, in order.
            if self.posted[q] - self.done[q] >= self.lanes[q].depth {
                break;
            }
            self.post_message(q, i, at, len)?;
            layout.next();
        }
        Ok(())
    }

    /// Posts message `i` (`len` bytes at `at` in the stream's region) on QP `q`:
    /// signalled every `signal_every` messages and at the QP's last.
    fn post_message(&mut self, q: usize, i: u64, at: u64, len: u32) -> AgentResult<()> {
        let (o, lane) = (self.o, self.lanes[q]);
        let seq = self.posted[q];
        let signalled =
            (seq + 1).is_multiple_of(u64::from(o.signal_every)) || seq + 1 == self.per[q];
        let (opcode, remote, sge) =
            stream_wr(o.verb, i, self.base, at, len, self.lkey, (lane.addr, lane.rkey))?;
        if self.fill_each {
            self.message.resize(len as usize, 0);
            o.content.fill(i, &mut self.message);
            self.local.write_at((o.local_offset + at) as usize, &self.message);
        }
        let flags = if signalled { ibv_send_flags::IBV_SEND_SIGNALED.0 } else { 0 };
        // A WRITE with immediate carries its index, which its receiver checks.
        let imm_data = if o.verb == StreamVerb::WriteImm { i as u32 } else { 0 };
        let wr = SendWr { wr_id: stream_wr_id(q, seq), opcode, flags, imm_data, remote };
        let t = Instant::now();
        // SAFETY: the SGE names `self.local`'s lkey: an `Mr` of the endpoint's `mrs`.
        // Every MR in this PD is an `Mr`, whose buffer is never borrowed (raw copies
        // only) and is freed only by its `Drop`, after `ibv_dereg_mr`; `Local` drops
        // its QPs before its MRs, so a WR still in flight when the stream ends is
        // covered too. No inline flag: the device, not the CPU, reaches the bytes, and
        // only inside that MR.
        unsafe { lane.qp.post_send(&wr, &[sge])? };
        self.post_ns += t.elapsed().as_nanos() as u64;
        self.posted[q] += 1;
        self.outstanding += 1;
        if signalled {
            self.flying[q].push_back((seq, Instant::now()));
        }
        Ok(())
    }

    /// Counts the completion of message `seq` on QP `q`, which came at `now`.
    fn complete(&mut self, q: usize, seq: u64, w: Completion, now: Instant) {
        // A completion completes everything before it on its QP (RC); a
        // failed one, everything before it but itself. Once a QP is in
        // error, each work request left on it is flushed with a completion
        // of its own, signalled or not.
        let ok = w.status == WcStatus::SUCCESS;
        if !self.broken[q] {
            let through = if ok { seq + 1 } else { seq };
            if through > self.done[q] {
                self.outstanding -= through - self.done[q];
                self.completed += through - self.done[q];
                self.done[q] = through;
            }
        }
        if !ok {
            self.outstanding = self.outstanding.saturating_sub(1);
            self.broken[q] = true;
            // Named by the message's index in the stream.
            let n = self.lanes.len() as u64;
            let index = self.o.content.on_qp(q, n).nth(seq as usize).unwrap_or(u64::MAX);
            self.failed.get_or_insert(Completion { wr_id: index, ..w });
            return;
        }
        while let Some(&(s, t)) = self.flying[q].front() {
            if s > seq {
                break;
            }
            if s == seq {
                self.latency.push(now.duration_since(t).as_micros() as u64);
            }
            self.flying[q].pop_front();
        }
    }

    /// Bytes of the completed messages: on each QP, the first `done` it posted.
    fn bytes_done(&self) -> u64 {
        let (c, n) = (&self.o.content, self.lanes.len() as u64);
        let mut seen = vec![0u64; self.lanes.len()];
        c.layout()
            .filter(|(i, _, _)| {
                let q = c.qp_of(*i, n);
                seen[q] += 1;
                seen[q] <= self.done[q]
            })
            .map(|(_, _, len)| u64::from(len))
            .sum()
    }

    /// An atomic stream's chain: the old values its completed atomics returned,
    /// in posting order, checked.
    fn atomic_chain(&self) -> Option<AtomicChain> {
        let StreamVerb::Atomic { add, from, .. } = self.o.verb else { return None };
        let (c, n) = (&self.o.content, self.lanes.len() as u64);
        let words = self.local.read_at(self.o.local_offset as usize, 8 * c.count as usize);
        let mut old = Vec::with_capacity(self.completed as usize);
        let mut seen = vec![0u64; self.lanes.len()];
        for (i, w) in words.chunks_exact(8).enumerate() {
            let q = c.qp_of(i as u64, n);
            seen[q] += 1;
            if seen[q] <= self.done[q] {
                old.push(w.try_into().map_or(0, u64::from_le_bytes));
            }
        }
        Some(AtomicChain::check(&old, from, add, self.lanes.len() == 1))
    }

    /// What the stream did, as the agent reports it.
    fn report(mut self, ep: &Local) -> StreamReport {
        let bytes = self.bytes_done();
        let t_ms = ep.started.elapsed().as_secs_f64() * 1000.0;
        let failed = self.failed.take().map(|w| ep.wc(w, t_ms));
        StreamReport {
            id: self.o.id.clone(),
            verb: self.o.verb,
            qps: self.lanes.len(),
            count: self.o.content.count,
            posted: self.posted.iter().sum(),
            completed: self.completed,
            bytes,
            elapsed_us: self.elapsed_us,
            latency_us: Percentiles::of(&mut self.latency),
            failed,
            timed_out: self.timed_out,
            post_ns: self.post_ns,
            mismatch: None,
            atomics: self.atomic_chain(),
        }
    }
}

/// A receive stream in progress: where its receives are posted, and how far
/// each QP got.
struct Receiving<'a> {
    o: &'a ReceiveOrder,
    /// Where SENDs land, `depth` slots a QP (none for WRITEs with immediate).
    mr: Option<&'a Mr>,
    /// The MR's address and lkey (0 without one).
    base: u64,
    lkey: u32,
    qps: Vec<&'a Qp<Rts>>,
    /// A slot's size: the stream's largest message.
    slot: u64,
    /// Per QP: how many messages it carries.
    per: Vec<u64>,
    /// Per QP: which message its next receive holds.
    next_of: Vec<Box<dyn Iterator<Item = u64> + 'a>>,
    /// Per QP: receives posted, and receives completed.
    posted: Vec<u64>,
    got: Vec<u64>,
    received: u64,
    bytes: u64,
    mismatch: Option<Mismatch>,
    failed: Option<Completion>,
    /// From the first message to the last, once driven.
    elapsed_us: u64,
    timed_out: bool,
}

impl<'a> Receiving<'a> {
    /// Receives for `o` on `qps`, into `mr`; none posted yet.
    fn new(o: &'a ReceiveOrder, mr: Option<&'a Mr>, qps: Vec<&'a Qp<Rts>>) -> Self {
        let c = &o.content;
        let n = qps.len() as u64;
        let (base, lkey) = mr.map_or((0, 0), |m| (m.addr(), m.lkey()));
        Receiving {
            o,
            mr,
            base,
            lkey,
            slot: u64::from(c.max_len()),
            per: c.per_qp(n),
            next_of: (0..qps.len()).map(|q| c.on_qp(q, n)).collect(),
            posted: vec![0; qps.len()],
            got: vec![0; qps.len()],
            received: 0,
            bytes: 0,
            mismatch: None,
            failed: None,
            elapsed_us: 0,
            timed_out: false,
            qps,
        }
    }

    /// Posts the first receives, then polls until every message came, one
    /// failed, or the stream's time ran out or it went idle; returns the
    /// completions of other work requests that came meanwhile (with when, in ms).
    fn drive(&mut self, ep: &Local) -> AgentResult<Vec<(Completion, f64)>> {
        for q in 0..self.qps.len() {
            self.refill(q)?;
        }
        let started = Instant::now();
        let until = started + Duration::from_millis(self.o.within_ms);
        let (mut first, mut last) = (None, started);
        let mut idle = Idle::default();
        let mut others = Vec::new();
        while self.received < self.o.content.count && self.failed.is_none() {
            let now = Instant::now();
            if now >= until || first.is_some() && now.duration_since(last) > RECEIVE_IDLE {
                self.timed_out = true;
                break;
            }
            let ws = ep.cq.poll(64)?;
            if ws.is_empty() {
                idle.wait();
                continue;
            }
            idle = Idle::default();
            for w in ws {
                let Some((q, k)) = from_receive_wr_id(w.wr_id, self.qps.len()) else {
                    others.push((w, ep.started.elapsed().as_secs_f64() * 1000.0));
                    continue;
                };
                last = Instant::now();
                first.get_or_insert(last);
                self.arrived(q, k, w)?;
            }
        }
        self.elapsed_us = last.duration_since(first.unwrap_or(started)).as_micros() as u64;
        Ok(others)
    }

    /// Tops QP `q` up to `depth` receives posted, as far as it has messages left.
    fn refill(&mut self, q: usize) -> AgentResult<()> {
        while self.posted[q] - self.got[q] < u64::from(self.o.depth) && self.posted[q] < self.per[q]
        {
            let k = self.posted[q];
            let sge = Sge {
                addr: self.base + self.slot_at(q, k),
                len: self.slot as u32,
                lkey: self.lkey,
            };
            let sges = if self.mr.is_some() { std::slice::from_ref(&sge) } else { &[] };
            // SAFETY: the SGE (none without an MR) is a slot of `self.mr`, an `Mr` of
            // the endpoint's `mrs` (`receive_region` checked every slot fits), under its
            // lkey. Its buffer is never borrowed (raw copies only) and is freed only by
            // its `Drop`, after `ibv_dereg_mr`; `Local` drops its QPs before its MRs,
            // so receives still posted when the stream ends are covered too.
            unsafe { self.qps[q].post_recv(receive_wr_id(q, k), sges)? };
            self.posted[q] += 1;
        }
        Ok(())
    }

    /// The slot of the `k`-th receive on QP `q` (from the MR's start): receives
    /// complete in the order they were posted.
    fn slot_at(&self, q: usize, k: u64) -> u64 {
        let depth = u64::from(self.o.depth);
        self.o.offset + (q as u64 * depth + k % depth) * self.slot
    }

    /// Takes the completion of receive `k` on QP `q`: its QP's next message,
    /// checked, and the QP's receives reposted at low water.
    fn arrived(&mut self, q: usize, k: u64, w: Completion) -> AgentResult<()> {
        // Receives complete in order on their QP: this is its next message.
        let i = self.next_of[q].next().unwrap_or(u64::MAX);
        if w.status != WcStatus::SUCCESS {
            self.failed.get_or_insert(Completion { wr_id: i, ..w });
            return Ok(());
        }
        self.got[q] = k + 1;
        self.received += 1;
        self.bytes += u64::from(w.byte_len);
        if self.mismatch.is_none() {
            self.mismatch = self.check(q, k, i, &w);
        }
        if self.posted[q] - self.got[q] <= u64::from(self.o.low_water) {
            self.refill(q)?;
        }
        Ok(())
    }

    /// How message `i`, taken by receive `k` on QP `q`, differs from what the
    /// seed says, if it does: a SEND's bytes, a WRITE with immediate's index.
    fn check(&self, q: usize, k: u64, i: u64, w: &Completion) -> Option<Mismatch> {
        match self.mr {
            Some(mr) => self
                .o
                .content
                .check_message(i, &mr.read_at(self.slot_at(q, k) as usize, w.byte_len as usize)),
            // A WRITE with immediate: its index, on the receive it consumed.
            None => (w.imm_data != Some(i as u32)).then(|| Mismatch {
                message: i,
                offset: 0,
                want: (i as u32).to_be_bytes().to_vec(),
                got: w.imm_data.map(|v| v.to_be_bytes().to_vec()).unwrap_or_default(),
            }),
        }
    }

    /// What the receives did, as the agent reports it.
    fn report(self, ep: &Local) -> StreamReport {
        let t_ms = ep.started.elapsed().as_secs_f64() * 1000.0;
        StreamReport {
            id: self.o.id.clone(),
            verb: StreamVerb::Receive,
            qps: self.qps.len(),
            count: self.o.content.count,
            posted: self.posted.iter().sum(),
            completed: self.received,
            bytes: self.bytes,
            elapsed_us: self.elapsed_us,
            latency_us: None,
            failed: self.failed.map(|w| ep.wc(w, t_ms)),
            timed_out: self.timed_out,
            post_ns: 0,
            mismatch: self.mismatch,
            atomics: None,
        }
    }
}

/// The work request for message `i` of a stream of `verb`, which lies `len` bytes
/// at `at` in the stream's region (from `base`, under `lkey`) and in the peer's
/// (`peer`: its address and rkey): its opcode, what it does remotely, and its local
/// buffer. An atomic works on the peer's one word and returns the old value into
/// the `i`-th word of the local region instead.
fn stream_wr(
    verb: StreamVerb,
    i: u64,
    base: u64,
    at: u64,
    len: u32,
    lkey: u32,
    (addr, rkey): (u64, u32),
) -> AgentResult<(ibv_wr_opcode::Type, Remote<'static>, Sge)> {
    let rdma = Remote::Rdma { addr: addr + at, rkey };
    let local = Sge { addr: base + at, len, lkey };
    Ok(match verb {
        StreamVerb::Write => (ibv_wr_opcode::IBV_WR_RDMA_WRITE, rdma, local),
        StreamVerb::Read => (ibv_wr_opcode::IBV_WR_RDMA_READ, rdma, local),
        StreamVerb::Atomic { .. } => {
            let (opcode, compare_add, swap) = match verb.atomic(i) {
                Some(AtomicOp::CmpSwap { compare, swap }) => {
                    (ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP, compare, swap)
                }
                Some(AtomicOp::FetchAdd { add }) => {
                    (ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD, add, 0)
                }
                None => return err("an atomic stream without atomics"),
            };
            (
                opcode,
                Remote::Atomic { addr, rkey, compare_add, swap },
                Sge { addr: base + 8 * i, len: 8, lkey },
            )
        }
        StreamVerb::Send => (ibv_wr_opcode::IBV_WR_SEND, Remote::None, local),
        StreamVerb::WriteImm => (ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM, rdma, local),
        StreamVerb::Receive => return err("a receive stream is `Receive`, not `Stream`"),
    })
}

/// A stream's work requests carry this in the top byte of their `wr_id`, then the
/// QP's index among the stream's (16 bits) and the message's sequence on it.
const STREAM_TAG: u64 = 0x5e << 56;

/// A receive stream's `wr_id`s: this tag, then as [`stream_wr_id`].
const RECEIVE_TAG: u64 = 0x5f << 56;

/// A receiving side stops this long after the last message came.
const RECEIVE_IDLE: Duration = Duration::from_secs(2);

/// Waiting on an empty CQ inside a one-vCPU VM: yield first, so the device's
/// kernel work runs, and sleep only once the queue has stayed empty a while.
#[derive(Default)]
struct Idle(u32);

impl Idle {
    fn wait(&mut self) {
        self.0 += 1;
        if self.0 > 1000 {
            std::thread::sleep(Duration::from_micros(50));
        } else {
            std::thread::yield_now();
        }
    }
}

fn receive_wr_id(q: usize, seq: u64) -> u64 {
    RECEIVE_TAG | ((q as u64 & 0xffff) << 40) | (seq & ((1 << 40) - 1))
}

fn from_receive_wr_id(wr_id: u64, qps: usize) -> Option<(usize, u64)> {
    let q = ((wr_id >> 40) & 0xffff) as usize;
    (wr_id & (0xff << 56) == RECEIVE_TAG && q < qps).then_some((q, wr_id & ((1 << 40) - 1)))
}

fn stream_wr_id(q: usize, seq: u64) -> u64 {
    STREAM_TAG | ((q as u64 & 0xffff) << 40) | (seq & ((1 << 40) - 1))
}

/// The QP index and sequence of a stream's `wr_id`, if it is one (of `qps` QPs).
fn from_stream_wr_id(wr_id: u64, qps: usize) -> Option<(usize, u64)> {
    let q = ((wr_id >> 40) & 0xffff) as usize;
    (wr_id & (0xff << 56) == STREAM_TAG && q < qps).then_some((q, wr_id & ((1 << 40) - 1)))
}
