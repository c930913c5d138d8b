//! Streams on the endpoint (`Action::Stream`, `Action::Receive`): the sending side
//! posts a stream's messages round robin over its QPs within its window and
//! polls them to completion; the receiving side keeps receives posted and checks
//! each message as it lands. What a stream is (its content, sizes, verbs) is the
//! protocol's vocabulary ([`crate::protocol::stream`]); this is its execution.
//!
//! Owns: posting and polling a stream, its `wr_id` tags, the wait on an idle CQ,
//! and the report the agent sends back. Imports: the executor's state ([`super`]),
//! the protocol's stream orders and reports, the verbs layer.
use std::time::{Duration, Instant};

use rdma_sys::{ibv_send_flags, ibv_wr_opcode};

use super::{err, AgentError, AgentResult, Local};
use crate::protocol::stream::{AtomicChain, AtomicOp, Percentiles, StreamVerb};
use crate::protocol::{ReceiveOrder, StreamOrder, StreamReport, Wc};
use crate::verbs::{Completion, Remote, SendWr, Sge};

impl Local {
    /// Posts a stream's messages round robin over its QPs, never more than its
    /// window outstanding, and polls until every one has completed, one failed
    /// (posting stops; what was posted is flushed), or its time ran out.
    /// Completions of other work requests that come meanwhile are kept as usual.
    pub(super) fn stream(&mut self, o: &StreamOrder) -> AgentResult<StreamReport> {
        let c = &o.content;
        if o.qps.is_empty() || o.window == 0 || o.signal_every == 0 {
            return err(format!("stream `{}`: no QP, or a window or signal_every of 0", o.id));
        }
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
        let sources = matches!(o.verb, StreamVerb::Write | StreamVerb::Send | StreamVerb::WriteImm);
        let fill_each = c.ring.is_some() && sources;
        if sources && !fill_each {
            let mut src = vec![0u8; total as usize];
            c.write_all(&mut src);
            local.write_at(o.local_offset as usize, &src);
        }
        let mut message = Vec::new();
        let (base, lkey) = (local.addr() + o.local_offset, local.lkey());
        let mut qps = Vec::new();
        for name in &o.qps {
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
            qps.push((q.connected()?, addr, rkey, u64::from(q.setup.caps.max_send_wr.max(1))));
        }
        let n = qps.len() as u64;
        // Per QP: how many posted, how many completed, and the signalled ones in
        // flight with when they were posted.
        let mut posted = vec![0u64; qps.len()];
        let mut done = vec![0u64; qps.len()];
        let mut flying: Vec<std::collections::VecDeque<(u64, Instant)>> =
            vec![Default::default(); qps.len()];
        let per = c.per_qp(n);
        let per_qp = |q: usize| per[q];
        // Per QP: whether a completion failed (the QP is in error from there).
        let mut broken = vec![false; qps.len()];
        let (mut outstanding, mut completed) = (0u64, 0u64);
        let mut latency = Vec::new();
        let mut others = Vec::new();
        let mut failed: Option<Completion> = None;
        let mut layout = c.layout();
        let mut next = layout.next();
        let started = Instant::now();
        let until = started + Duration::from_millis(o.within_ms);
        let mut last = started;
        let mut idle = Idle::default();
        let mut timed_out = false;
        let mut post_ns = 0u64;
        loop {
            while failed.is_none() && outstanding < u64::from(o.window) {
                let Some((i, at, len)) = next else { break };
                let q = c.qp_of(i, n);
                let seq = posted[q];
                // Its QP's send queue is full (the QP is behind, recovering a
                // loss): wait for it, in order.
                if seq - done[q] >= qps[q].3 {
                    break;
                }
                let signalled = (seq + 1) % u64::from(o.signal_every) == 0 || seq + 1 == per_qp(q);
                let (qp, addr, rkey, _) = qps[q];
                let (opcode, remote, sge) =
                    stream_wr(o.verb, i, base, at, len, lkey, (addr, rkey))?;
                if fill_each {
                    message.resize(len as usize, 0);
                    c.fill(i, &mut message);
                    local.write_at((o.local_offset + at) as usize, &message);
                }
                let flags = if signalled { ibv_send_flags::IBV_SEND_SIGNALED.0 } else { 0 };
                // A WRITE with immediate carries its index, which its receiver checks.
                let imm_data = if o.verb == StreamVerb::WriteImm { i as u32 } else { 0 };
                let wr = SendWr { wr_id: stream_wr_id(q, seq), opcode, flags, imm_data, remote };
                let t = Instant::now();
                qp.post_send(&wr, &[sge])?;
                post_ns += t.elapsed().as_nanos() as u64;
                posted[q] += 1;
                outstanding += 1;
                if signalled {
                    flying[q].push_back((seq, Instant::now()));
                }
                next = layout.next();
            }
            if completed == c.count || (failed.is_some() && outstanding == 0) {
                break;
            }
            if Instant::now() >= until {
                timed_out = true;
                break;
            }
            let got = self.cq.poll(64)?;
            if got.is_empty() {
                idle.wait();
                continue;
            }
            idle = Idle::default();
            let now = Instant::now();
            for w in got {
                let Some((q, seq)) = from_stream_wr_id(w.wr_id, qps.len()) else {
                    others.push((w, self.started.elapsed().as_secs_f64() * 1000.0));
                    continue;
                };
                // A completion completes everything before it on its QP (RC); a
                // failed one, everything before it but itself. Once a QP is in
                // error, each work request left on it is flushed with a completion
                // of its own, signalled or not.
                let ok = w.status == crate::verbs::WcStatus::SUCCESS;
                last = now;
                if !broken[q] {
                    let through = if ok { seq + 1 } else { seq };
                    if through > done[q] {
                        outstanding -= through - done[q];
                        completed += through - done[q];
                        done[q] = through;
                    }
                }
                if !ok {
                    outstanding = outstanding.saturating_sub(1);
                    broken[q] = true;
                    // Named by the message's index in the stream.
                    failed.get_or_insert(Completion {
                        wr_id: c.on_qp(q, n).nth(seq as usize).unwrap_or(u64::MAX),
                        ..w
                    });
                    continue;
                }
                while let Some(&(s, t)) = flying[q].front() {
                    if s > seq {
                        break;
                    }
                    if s == seq {
                        latency.push(now.duration_since(t).as_micros() as u64);
                    }
                    flying[q].pop_front();
                }
            }
        }
        // Bytes of the completed messages: on each QP, the first `done` it posted.
        let mut seen = vec![0u64; qps.len()];
        let bytes: u64 = c
            .layout()
            .filter(|(i, _, _)| {
                let q = c.qp_of(*i, n);
                seen[q] += 1;
                seen[q] <= done[q]
            })
            .map(|(_, _, len)| u64::from(len))
            .sum();
        let t_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let report = StreamReport {
            id: o.id.clone(),
            verb: o.verb,
            qps: qps.len(),
            count: c.count,
            posted: posted.iter().sum(),
            completed,
            bytes,
            elapsed_us: last.duration_since(started).as_micros() as u64,
            latency_us: Percentiles::of(&mut latency),
            failed: failed.map(|w| self.wc(w, t_ms)),
            timed_out,
            post_ns,
            mismatch: None,
            atomics: None,
        };
        let mut report = report;
        // The old values the completed atomics returned, in posting order.
        if let StreamVerb::Atomic { add, from, .. } = o.verb {
            let words = local.read_at(o.local_offset as usize, 8 * c.count as usize);
            let mut old = Vec::with_capacity(completed as usize);
            let mut seen = vec![0u64; qps.len()];
            for (i, w) in words.chunks_exact(8).enumerate() {
                let q = c.qp_of(i as u64, n);
                seen[q] += 1;
                if seen[q] <= done[q] {
                    old.push(w.try_into().map_or(0, u64::from_le_bytes));
                }
            }
            report.atomics = Some(AtomicChain::check(&old, from, add, qps.len() == 1));
        }
        let others: Vec<Wc> = others.into_iter().map(|(w, t)| self.wc(w, t)).collect();
        self.wcs.extend(others);
        // The first error is a completion like any other, for `[[expect.completion]]`.
        self.wcs.extend(report.failed.clone());
        Ok(report)
    }

    /// The receiving side of a SEND or WRITE-with-immediate stream: keeps `depth`
    /// receives posted on each QP, reposting once no more than `low_water` are
    /// left, and checks each message as it arrives (in order on its QP) against
    /// what the seed says: a SEND's bytes, a WRITE's immediate (its index).
    pub(super) fn receive(&mut self, o: &ReceiveOrder) -> AgentResult<StreamReport> {
        let c = &o.content;
        if o.qps.is_empty() || o.depth == 0 || o.low_water >= o.depth {
            return err(format!(
                "receives of `{}`: no QP, a depth of 0, or a low water mark not below it",
                o.id
            ));
        }
        let slot = u64::from(c.max_len());
        let mr = match &o.mr {
            Some(name) => {
                let mr = self
                    .mrs
                    .get(name)
                    .ok_or_else(|| AgentError::from(format!("no MR `{name}` on this endpoint")))?;
                let need = slot * u64::from(o.depth) * o.qps.len() as u64;
                if o.offset.saturating_add(need) > mr.len() as u64 {
                    return err(format!("receives of `{}`: {} slots of {slot} bytes from offset {} run past the end of MR `{name}`", o.id, o.depth as usize * o.qps.len(), o.offset));
                }
                Some(mr)
            }
            None => None,
        };
        let mut qps = Vec::new();
        for name in &o.qps {
            qps.push(self.qp(name)?.connected()?);
        }
        let n = qps.len() as u64;
        let per = c.per_qp(n);
        let per_qp = |q: usize| per[q];
        // Which message each QP's next receive holds.
        let mut next_of: Vec<_> = (0..qps.len()).map(|q| c.on_qp(q, n)).collect();
        // The slot of the k-th receive on QP q: receives complete in the order
        // they were posted.
        let at = |q: usize, k: u64| {
            o.offset + (q as u64 * u64::from(o.depth) + k % u64::from(o.depth)) * slot
        };
        let (base, lkey) = mr.map_or((0, 0), |m| (m.addr(), m.lkey()));
        let mut posted = vec![0u64; qps.len()];
        let mut got = vec![0u64; qps.len()];
        let refill = |q: usize, posted: &mut [u64], got: &[u64]| -> AgentResult<()> {
            while posted[q] - got[q] < u64::from(o.depth) && posted[q] < per_qp(q) {
                let k = posted[q];
                let sge = Sge { addr: base + at(q, k), len: slot as u32, lkey };
                qps[q].post_recv(
                    receive_wr_id(q, k),
                    if mr.is_some() { std::slice::from_ref(&sge) } else { &[] },
                )?;
                posted[q] += 1;
            }
            Ok(())
        };
        for q in 0..qps.len() {
            refill(q, &mut posted, &got)?;
        }
        let (mut received, mut bytes) = (0u64, 0u64);
        let mut mismatch = None;
        let mut failed: Option<Completion> = None;
        let mut others = Vec::new();
        let started = Instant::now();
        let until = started + Duration::from_millis(o.within_ms);
        let (mut first, mut last) = (None, started);
        let mut timed_out = false;
        let mut idle = Idle::default();
        while received < c.count && failed.is_none() {
            let now = Instant::now();
            if now >= until || first.is_some() && now.duration_since(last) > RECEIVE_IDLE {
                timed_out = true;
                break;
            }
            let ws = self.cq.poll(64)?;
            if ws.is_empty() {
                idle.wait();
                continue;
            }
            idle = Idle::default();
            for w in ws {
                let Some((q, k)) = from_receive_wr_id(w.wr_id, qps.len()) else {
                    others.push((w, self.started.elapsed().as_secs_f64() * 1000.0));
                    continue;
                };
                last = Instant::now();
                first.get_or_insert(last);
                // Receives complete in order on their QP: this is its next message.
                let i = next_of[q].next().unwrap_or(u64::MAX);
                if w.status != crate::verbs::WcStatus::SUCCESS {
                    failed.get_or_insert(Completion { wr_id: i, ..w });
                    continue;
                }
                got[q] = k + 1;
                received += 1;
                bytes += u64::from(w.byte_len);
                if mismatch.is_none() {
                    mismatch = match mr {
                        Some(mr) => {
                            c.check_message(i, &mr.read_at(at(q, k) as usize, w.byte_len as usize))
                        }
                        // A WRITE with immediate: its index, on the receive it consumed.
                        None => (w.imm_data != Some(i as u32)).then(|| {
                            crate::protocol::stream::Mismatch {
                                message: i,
                                offset: 0,
                                want: (i as u32).to_be_bytes().to_vec(),
                                got: w
                                    .imm_data
                                    .map(|v| v.to_be_bytes().to_vec())
                                    .unwrap_or_default(),
                            }
                        }),
                    };
                }
                if posted[q] - got[q] <= u64::from(o.low_water) {
                    refill(q, &mut posted, &got)?;
                }
            }
        }
        let t_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let report = StreamReport {
            id: o.id.clone(),
            verb: StreamVerb::Receive,
            qps: qps.len(),
            count: c.count,
            posted: posted.iter().sum(),
            completed: received,
            bytes,
            elapsed_us: last.duration_since(first.unwrap_or(started)).as_micros() as u64,
            latency_us: None,
            failed: failed.map(|w| self.wc(w, t_ms)),
            timed_out,
            post_ns: 0,
            mismatch,
            atomics: None,
        };
        let others: Vec<Wc> = others.into_iter().map(|(w, t)| self.wc(w, t)).collect();
        self.wcs.extend(others);
        self.wcs.extend(report.failed.clone());
        Ok(report)
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
