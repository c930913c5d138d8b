//! Steps: each `[[step]]` checked against the objects it names (QP, MR, SRQ,
//! memory window, remote memory), its work request built, its waits bounded.
//!
//! Owns: the `impl Checker` for steps and the work requests they post. Imports: the
//! checker's vocabulary (`use super::*`); nothing else.
use super::*;

/// What the steps so far have used up: probe and stream ids, and the time probes
/// wait to settle (against the scenario's deadline).
struct Seen {
    probes: Vec<String>,
    streams: Vec<String>,
    waited: u64,
    timeout_ms: u64,
}

impl<'a> Checker<'a> {
    /// Where a serde message about a step points: the key it names, the `op` for
    /// an unknown op, else the step.
    pub(super) fn step_error(&mut self, s: &file::StepFile, message: &str) {
        let named = message.split('`').nth(1).filter(|k| s.keys.contains_key(*k));
        let span = match (named, message.starts_with("unknown variant")) {
            (_, true) => s.at("op"),
            (Some(k), _) => s.at(k),
            (None, _) => s.span.clone(),
        };
        let hint = serde_hint(message).or_else(|| {
            message.starts_with("missing field").then(|| {
                "`roce schema` lists each op's keys; `roce check` says which are missing"
                    .to_string()
            })
        });
        self.err(Some(span), message.to_string(), hint);
    }

    /// The `[[step]]`s, each checked against what it names; a step with an error
    /// is left out (the errors are what the check reports).
    pub(super) fn steps(&mut self, timeout_ms: u64) -> (Vec<Step>, Vec<StepExpect>) {
        let mut out = Vec::new();
        let mut answers = Vec::new();
        let mut seen = Seen { probes: Vec::new(), streams: Vec::new(), waited: 0, timeout_ms };
        for (i, s) in self.f.steps.iter().enumerate() {
            let op = match &s.op {
                Ok(op) => op,
                Err(m) => {
                    self.step_error(s, m);
                    continue;
                }
            };
            let step = match op {
                StepOp::Sync {} => Some(Step::Sync),
                StepOp::Sleep { ms } => {
                    self.check_wait(s, "ms", *ms, &mut seen);
                    Some(Step::Sleep { ms: *ms })
                }
                StepOp::WaitCompletions { on, count, within_ms } => {
                    self.endpoint_ok(s.at("on"), on);
                    let within_ms = within_ms.unwrap_or(DEFAULT_WAIT_COMPLETIONS_MS);
                    self.check_wait(s, "within_ms", within_ms, &mut seen);
                    Some(act(on, Action::WaitCompletions { count: *count, within_ms }))
                }
                StepOp::PostRecv { on, qp, wr_id, sge } => self.qp_step(i, s, on, qp).map(|q| {
                    let sges = self.sges(s, on, sge, false, q.qp_type);
                    act(on, Action::PostRecv { qp: qp.clone(), wr_id: *wr_id, sges })
                }),
                StepOp::Stream { .. } => self.stream(s, op, &mut seen.streams),
                StepOp::PostSrqRecv { on, srq, wr_id, sge } => {
                    self.srq_step(s, on, srq).then(|| {
                        let sges = self.sges(s, on, sge, false, QpType::Rc);
                        act(on, Action::PostSrqRecv { srq: srq.clone(), wr_id: *wr_id, sges })
                    })
                }
                StepOp::ArmSrq { on, srq, limit } => self
                    .srq_step(s, on, srq)
                    .then(|| act(on, Action::ArmSrq { srq: srq.clone(), limit: *limit })),
                StepOp::Probe { on, qp, probe } => self.probe_step(i, s, on, qp, probe, &mut seen),
                StepOp::ModifyQp { .. }
                | StepOp::QueryQp { .. }
                | StepOp::DeregMr { .. }
                | StepOp::ReregMr { .. }
                | StepOp::DeallocMw { .. } => self.object_step(i, s, op),
                StepOp::ResizeCq { on, cqe } => self
                    .endpoint_ok(s.at("on"), on)
                    .then(|| act(on, Action::ResizeCq { cqe: *cqe })),
                StepOp::ArmCq { on, solicited_only } => self
                    .endpoint_ok(s.at("on"), on)
                    .then(|| act(on, Action::ArmCq { solicited_only: *solicited_only })),
                StepOp::AwaitNotify { on, within_ms, .. } => {
                    let within_ms = within_ms.unwrap_or(DEFAULT_NOTIFY_MS);
                    self.check_wait(s, "within_ms", within_ms, &mut seen);
                    self.endpoint_ok(s.at("on"), on)
                        .then(|| act(on, Action::AwaitNotify { within_ms }))
                }
                _ => self.work_request(i, s, op),
            };
            let answer = self.step_answer(s, op);
            if let Some(step) = step {
                let queried = match op {
                    StepOp::QueryQp { state, .. } => self.qp_state(s, state).map(Outcome::State),
                    StepOp::AwaitNotify { notified, .. } => Some(Outcome::Notified(*notified)),
                    _ => None,
                };
                if let Some(outcome) = queried {
                    let record_deviation = answer.as_ref().is_some_and(|a| a.record_deviation);
                    answers.push(StepExpect { index: out.len(), outcome, record_deviation });
                } else if let Some(a) = answer {
                    answers.push(StepExpect { index: out.len(), ..a });
                }
                out.push(step);
            }
        }
        (out, answers)
    }

    /// What a step's `expect`, `errno` and `record_deviation` say (its index is
    /// set by the caller).
    fn step_answer(&mut self, s: &file::StepFile, op: &StepOp) -> Option<StepExpect> {
        let o = match &s.outcome {
            Ok(o) => o,
            Err(m) => {
                let k = file::StepOutcomeFile::KEYS.into_iter().find(|k| m.contains(k));
                self.err(Some(k.map_or(s.span.clone(), |k| s.at(k))), m.clone(), None);
                return None;
            }
        };
        let errno = o.errno.as_ref().and_then(|e| match e.parse::<Errno>() {
            Ok(x) => Some(x),
            Err(u) => {
                self.err(Some(s.at("errno")), format!("unknown errno `{e}`"), u.hint());
                None
            }
        });
        let outcome = match o.expect.as_deref() {
            None if errno.is_some() => {
                let hint = Some("say `expect = \"refused\"` beside it".to_string());
                self.err(Some(s.at("errno")), "`errno` needs `expect = \"refused\"`", hint);
                return None;
            }
            None if o.record_deviation.is_some()
                && !matches!(op, StepOp::QueryQp { .. } | StepOp::AwaitNotify { .. }) =>
            {
                let hint = Some("`expect` says what the device must answer; `record_deviation` records one that answers otherwise".to_string());
                self.err(Some(s.at("record_deviation")), "`record_deviation` needs `expect`", hint);
                return None;
            }
            None => Outcome::Accepted,
            Some("refused") => Outcome::Refused(errno),
            Some("accepted") if errno.is_some() => {
                self.err(Some(s.at("errno")), "an accepted verb has no errno", None);
                return None;
            }
            Some("accepted") => Outcome::Accepted,
            Some(x) => {
                let hint = name_hint(x, ["refused", "accepted"]);
                self.err(
                    Some(s.at("expect")),
                    format!("unknown `expect` `{x}`: a step's verb is `refused` or `accepted`"),
                    hint,
                );
                return None;
            }
        };
        if let (Some(_), StepOp::Sync {} | StepOp::Sleep { .. } | StepOp::WaitCompletions { .. }) =
            (&o.expect, op)
        {
            self.err(
                Some(s.at("expect")),
                format!("a `{}` step calls no verb to refuse", op_name(op)),
                None,
            );
            return None;
        }
        if matches!(op, StepOp::Stream { .. } | StepOp::Probe { .. }) && o.expect.is_some() {
            let hint = Some(
                "a stream's and a probe's outcomes are judged by their own expectations"
                    .to_string(),
            );
            self.err(
                Some(s.at("expect")),
                format!("`expect` is for a step that calls one verb, not a `{}`", op_name(op)),
                hint,
            );
            return None;
        }
        if o.expect.is_none() && o.record_deviation.is_none() {
            return None;
        }
        Some(StepExpect {
            index: 0,
            outcome,
            record_deviation: o.record_deviation.unwrap_or(false),
        })
    }

    /// A QP state as a step names it.
    fn qp_state(&mut self, s: &file::StepFile, state: &str) -> Option<QpStateName> {
        match state.parse::<QpStateName>() {
            Ok(QpStateName(7)) => {
                self.err(
                    Some(s.at("state")),
                    "`unknown` is no state a QP can be moved to or found in",
                    None,
                );
                None
            }
            Ok(st) => Some(st),
            Err(u) => {
                let hint = u.hint().or_else(|| {
                    Some("a QP state: reset, init, rtr, rts, sqd, sqe, err".to_string())
                });
                self.err(Some(s.at("state")), format!("unknown QP state `{state}`"), hint);
                None
            }
        }
    }

    /// A step on a verbs object itself: a QP's state, an MR's registration, a
    /// window's life.
    fn object_step(&mut self, i: usize, s: &file::StepFile, op: &StepOp) -> Option<Step> {
        match op {
            StepOp::ModifyQp { on, qp, state, state_only, access } => {
                let q = self.qp_step(i, s, on, qp)?;
                let state = self.qp_state(s, state)?;
                let access = access.as_ref().map(|a| self.access(s.at("access"), a));
                if access.is_some() && q.qp_type == QpType::Ud {
                    let hint = Some("a UD QP has a Q_Key, no remote access flags".to_string());
                    self.err(Some(s.at("access")), format!("QP `{qp}` is UD"), hint);
                    return None;
                }
                Some(act(
                    on,
                    Action::ModifyQp { qp: qp.clone(), state, state_only: *state_only, access },
                ))
            }
            StepOp::QueryQp { on, qp, .. } => {
                self.qp_step(i, s, on, qp)?;
                Some(act(on, Action::QueryQp { qp: qp.clone() }))
            }
            StepOp::DeregMr { on, mr } => {
                self.own_mr(s, on, mr).then(|| act(on, Action::DeregMr { mr: mr.clone() }))
            }
            StepOp::ReregMr { on, mr, access } => {
                let access = self.access(s.at("access"), access);
                self.own_mr(s, on, mr).then(|| act(on, Action::ReregMr { mr: mr.clone(), access }))
            }
            StepOp::DeallocMw { on, mw } => {
                if !self.endpoint_ok(s.at("on"), on) {
                    return None;
                }
                if self.mw_file(on, mw).is_none() {
                    let hint = name_hint(
                        mw,
                        self.f.mws.iter().filter(|w| *w.on == *on).map(|w| w.name.as_str()),
                    );
                    self.err(Some(s.at("mw")), format!("no memory window `{mw}` on `{on}`"), hint);
                    return None;
                }
                Some(act(on, Action::DeallocMw { mw: mw.clone() }))
            }
            _ => None,
        }
    }

    /// An MR of the step's own endpoint.
    fn own_mr(&mut self, s: &file::StepFile, on: &str, mr: &str) -> bool {
        if !self.endpoint_ok(s.at("on"), on) {
            return false;
        }
        if self.mr_file(on, mr).is_some() {
            return true;
        }
        let hint = name_hint(mr, self.mr_names_on(on));
        self.err(Some(s.at("mr")), format!("no MR `{mr}` on `{on}`"), hint);
        false
    }

    /// A step that posts a send-queue work request: its verb and what only that
    /// verb carries, checked, then the post itself ([`Checker::post`]).
    fn work_request(&mut self, i: usize, s: &file::StepFile, op: &StepOp) -> Option<Step> {
        match op {
            StepOp::Send { on, qp, wr_id, sge, flags, to, qkey }
            | StepOp::SendImm { on, qp, wr_id, sge, flags, to, qkey, .. } => {
                let imm = match op {
                    StepOp::SendImm { imm_data, .. } => Some(*imm_data),
                    _ => None,
                };
                let verb = Verb::Send { imm, qkey: *qkey };
                let ud = self.f.qps.iter().any(|q| *q.name == *qp && q.qp_type == QpType::Ud);
                if qkey.is_some() && !ud {
                    let hint = Some("a Q_Key is a UD WR's; RC and UC QPs have none".to_string());
                    self.err(
                        Some(s.at("qkey")),
                        format!("`qkey` on a SEND of `{qp}`, not a UD QP"),
                        hint,
                    );
                }
                if let Some(t) = to {
                    self.endpoint_ok(s.at("to"), t);
                }
                self.post(i, s, on, qp, *wr_id, sge, flags, verb)
            }
            StepOp::Write { on, qp, wr_id, sge, flags, remote } => {
                let remote = self.remote(s, on, qp, remote);
                self.post(i, s, on, qp, *wr_id, sge, flags, Verb::Write { remote, imm: None })
            }
            StepOp::WriteImm { on, qp, wr_id, sge, flags, remote, imm_data } => {
                let verb =
                    Verb::Write { remote: self.remote(s, on, qp, remote), imm: Some(*imm_data) };
                self.post(i, s, on, qp, *wr_id, sge, flags, verb)
            }
            StepOp::Read { on, qp, wr_id, sge, flags, remote } => {
                let remote = self.remote(s, on, qp, remote);
                self.post(i, s, on, qp, *wr_id, sge, flags, Verb::Read { remote })
            }
            StepOp::CmpSwap { on, qp, wr_id, sge, flags, remote, compare, swap } => {
                let remote = self.remote(s, on, qp, remote);
                let verb = Verb::CmpSwap { remote, compare: *compare, swap: *swap };
                self.post(i, s, on, qp, *wr_id, sge, flags, verb)
            }
            StepOp::FetchAdd { on, qp, wr_id, sge, flags, remote, add } => {
                let verb = Verb::FetchAdd { remote: self.remote(s, on, qp, remote), add: *add };
                self.post(i, s, on, qp, *wr_id, sge, flags, verb)
            }
            StepOp::AtomicWrite { on, qp, wr_id, flags, remote, value } => {
                self.uses(Feature::AtomicWrite, s.at("op"));
                let value = self.atomic_write_value(s, value);
                let remote = self.remote(s, on, qp, remote);
                let value = Hex(value.to_vec());
                self.post(i, s, on, qp, *wr_id, &[], flags, Verb::AtomicWrite { remote, value })
            }
            StepOp::Flush { on, qp, wr_id, flags, remote, len, placement, level } => {
                let verb = self.flush(s, on, qp, remote, *len, placement, level);
                self.post(i, s, on, qp, *wr_id, &[], flags, verb)
            }
            StepOp::BindMw { on, qp, wr_id, flags, mw, mr, offset, len, access, outside_mr } => {
                let verb =
                    self.bind_mw(s, on, mw, mr, (*offset, *len, *outside_mr), access.as_ref());
                self.post(i, s, on, qp, *wr_id, &[], flags, verb)
            }
            StepOp::SendInv { on, qp, wr_id, sge, flags, invalidate } => {
                let invalidate = self.invalidate(s, on, qp, invalidate);
                self.post(i, s, on, qp, *wr_id, sge, flags, Verb::SendInv { invalidate })
            }
            StepOp::LocalInv { on, qp, wr_id, flags, mw } => {
                if self.endpoint_ok(s.at("on"), on) && self.mw_file(on, mw).is_none() {
                    let hint = name_hint(
                        mw,
                        self.f.mws.iter().filter(|w| *w.on == *on).map(|w| w.name.as_str()),
                    );
                    self.err(Some(s.at("mw")), format!("no memory window `{mw}` on `{on}`"), hint);
                }
                self.post(i, s, on, qp, *wr_id, &[], flags, Verb::LocalInv { mw: mw.clone() })
            }
            StepOp::Sync {}
            | StepOp::Sleep { .. }
            | StepOp::WaitCompletions { .. }
            | StepOp::PostRecv { .. }
            | StepOp::Stream { .. }
            | StepOp::PostSrqRecv { .. }
            | StepOp::ArmSrq { .. }
            | StepOp::Probe { .. }
            | StepOp::ModifyQp { .. }
            | StepOp::QueryQp { .. }
            | StepOp::DeregMr { .. }
            | StepOp::ReregMr { .. }
            | StepOp::DeallocMw { .. }
            | StepOp::ArmCq { .. }
            | StepOp::ResizeCq { .. }
            | StepOp::AwaitNotify { .. } => None,
        }
    }

    /// The 8 bytes an ATOMIC WRITE carries.
    fn atomic_write_value(&mut self, s: &file::StepFile, value: &file::Content) -> [u8; 8] {
        match value.try_bytes(8) {
            Ok(b) => match <[u8; 8]>::try_from(b.as_slice()) {
                Ok(v) => v,
                Err(_) => {
                    self.err(
                        Some(s.at("value")),
                        format!("an ATOMIC WRITE carries 8 bytes, not {}", b.len()),
                        Some(
                            "value = { u64 = 7 } or { bytes = \"01 02 03 04 05 06 07 08\" }".into(),
                        ),
                    );
                    [0; 8]
                }
            },
            Err(e) => {
                self.err(Some(s.at("value")), e, None);
                [0; 8]
            }
        }
    }

    /// A FLUSH: its placement type and selectivity level named, the feature it
    /// needs noted, its range (the rest of the remote MR when no `len`).
    #[allow(clippy::too_many_arguments)]
    fn flush(
        &mut self,
        s: &file::StepFile,
        on: &str,
        qp: &str,
        remote: &file::Remote,
        len: Option<u64>,
        placement: &Option<String>,
        level: &Option<String>,
    ) -> Verb {
        let placement = match placement.as_deref().unwrap_or("global") {
            "global" => Placement::Global,
            "persistent" => Placement::Persistent,
            other => {
                self.err(
                    Some(s.at("placement")),
                    format!("unknown placement type `{other}`"),
                    Some("`global` (global visibility) or `persistent` (persistence)".into()),
                );
                Placement::Global
            }
        };
        let level = match level.as_deref().unwrap_or("range") {
            "range" => Selectivity::Range,
            "mr" => Selectivity::Mr,
            other => {
                self.err(
                    Some(s.at("level")),
                    format!("unknown selectivity level `{other}`"),
                    Some("`range` (the bytes given) or `mr` (the whole MR)".into()),
                );
                Selectivity::Range
            }
        };
        self.uses(
            if placement == Placement::Global { Feature::Flush } else { Feature::FlushPersistent },
            s.at("op"),
        );
        let remote = self.remote(s, on, qp, remote);
        let len = len.unwrap_or_else(|| {
            self.remote_size(on, qp, &remote).saturating_sub(remote.offset.max(0).unsigned_abs())
        });
        Verb::Flush { remote, len, placement, level }
    }

    /// A memory-window bind: the window and MR exist on `on`, the range
    /// (`offset`, `len`, and whether it may run past the MR) lies within the MR
    /// or, when said, within the guard region after it; noted as where the
    /// window is bound from here on.
    fn bind_mw(
        &mut self,
        s: &file::StepFile,
        on: &str,
        mw: &str,
        mr: &str,
        (offset, len, outside_mr): (u64, Option<u64>, bool),
        access: Option<&Vec<String>>,
    ) -> Verb {
        let access = match access {
            Some(l) => self.access(s.at("access"), l),
            None => Access(Access::flag("remote_write").map_or(0, |a| a.0)),
        };
        let size = match (self.mw_file(on, mw), self.mr_file(on, mr)) {
            (None, _) => {
                let hint = name_hint(
                    mw,
                    self.f.mws.iter().filter(|w| *w.on == *on).map(|w| w.name.as_str()),
                );
                self.err(Some(s.at("mw")), format!("no memory window `{mw}` on `{on}`"), hint);
                None
            }
            (_, None) => {
                let hint = name_hint(mr, self.mr_names_on(on));
                self.err(Some(s.at("mr")), format!("no MR `{mr}` on `{on}`"), hint);
                None
            }
            (Some(_), Some(m)) => Some(m.size.value),
        };
        let len = len.unwrap_or_else(|| size.unwrap_or(0).saturating_sub(offset));
        if let Some(size) = size {
            let end = offset.saturating_add(len);
            let guard = crate::vocab::memory::GUARD as u64;
            if end > size && !outside_mr {
                self.err(
                    Some(s.at("len")),
                    format!("{offset}+{len} runs past the end of MR `{mr}` ({size} bytes)"),
                    Some("to see the device refuse a bind outside its MR (mw.bind.within-region), say `outside_mr = true` on the step".into()),
                );
            } else if end > size + guard {
                self.err(
                    Some(s.at("len")),
                    format!("{offset}+{len} runs {} bytes past the end of MR `{mr}`; `outside_mr` reaches at most {guard} past it", end - size),
                    None,
                );
            }
        }
        self.bound.insert((on.to_string(), mw.to_string()), (mr.to_string(), offset, len));
        Verb::BindMw { mw: mw.to_string(), mr: mr.to_string(), offset, len, access }
    }

    /// What a SEND with Invalidate invalidates: a window of the peer, or an rkey.
    fn invalidate(
        &mut self,
        s: &file::StepFile,
        on: &str,
        qp: &str,
        invalidate: &file::Invalidate,
    ) -> Invalidate {
        match (&invalidate.mw, invalidate.rkey) {
            (Some(w), None) => {
                let peer = self.peer_of(on, qp).unwrap_or_default();
                if self.qp_file(qp).is_some() && self.mw_file(&peer, w).is_none() {
                    let hint = name_hint(
                        w,
                        self.f.mws.iter().filter(|x| *x.on == peer).map(|x| x.name.as_str()),
                    );
                    self.err(
                        Some(s.at("invalidate")),
                        format!("no memory window `{w}` on `{peer}`, the other end of `{qp}`"),
                        hint,
                    );
                }
                Invalidate::Mw { mw: w.to_string(), rkey: None }
            }
            (None, Some(k)) => Invalidate::Rkey(k),
            _ => {
                self.err(Some(s.at("invalidate")), "say what to invalidate: `{ mw = \"…\" }` (a window of the peer) or `{ rkey = … }`, one of them", None);
                Invalidate::Rkey(0)
            }
        }
    }

    /// A probe step: its id unique, its settle time within the scenario's
    /// deadline, the crafted request checked against its QP.
    fn probe_step(
        &mut self,
        i: usize,
        s: &file::StepFile,
        on: &str,
        qp: &str,
        probe: &file::ProbeFile,
        seen: &mut Seen,
    ) -> Option<Step> {
        let q = self.qp_step(i, s, on, qp);
        if seen.probes.contains(&probe.id) {
            self.err(Some(s.at("probe")), format!("a second probe named `{}`", probe.id), None);
        }
        seen.probes.push(probe.id.clone());
        let settle = probe.settle_ms.unwrap_or(DEFAULT_SETTLE_MS);
        self.check_settle(s, settle, seen.waited, seen.timeout_ms);
        if let Some(q) = probe.quiet_ms.filter(|&q| q == 0 || q >= settle) {
            let what = if q == 0 {
                "a probe's `quiet_ms` of 0 would not wait for any answer".to_string()
            } else {
                format!("`quiet_ms = {q}` ends no wait shorter than the probe's `settle_ms` of {settle}")
            };
            self.err(
                Some(s.at("probe")),
                what,
                Some("`quiet_ms` is the quiet gap that ends the wait early (a few times the target's answer time); `settle_ms` the longest wait".into()),
            );
        }
        seen.waited += settle.min(MAX_SETTLE_MS);
        q.and_then(|q| self.probe(s, probe, q, on, qp)).map(|p| act(on, Action::Probe(p)))
    }

    /// A step's remote end: an MR of the peer as written, or where the peer's
    /// memory window was last bound (an error when no earlier step binds it).
    pub(super) fn remote(
        &mut self,
        s: &file::StepFile,
        on: &str,
        qp: &str,
        r: &file::Remote,
    ) -> RemoteRef {
        let at = Some(s.at("remote"));
        match (&r.mr, &r.mw) {
            (Some(mr), None) => {
                RemoteRef { mr: mr.clone(), offset: r.offset, rkey: r.rkey, mw: None }
            }
            (None, Some(w)) => {
                let Some(peer) = self.peer_of(on, qp) else {
                    return RemoteRef {
                        mr: String::new(),
                        offset: r.offset,
                        rkey: r.rkey,
                        mw: Some(w.clone()),
                    };
                };
                match self.bound.get(&(peer.clone(), w.clone())).cloned() {
                    Some((mr, off, len)) => {
                        if r.offset >= len as i64 && r.rkey.is_none() {
                            self.err(at, format!("offset {} is past the end of memory window `{w}` ({len} bytes bound)", r.offset), Some("to provoke a NAK on purpose, set `rkey` too".into()));
                        }
                        // Bound within an MR of at most MAX_MR bytes: no wrap.
                        RemoteRef {
                            mr,
                            offset: off as i64 + r.offset,
                            rkey: r.rkey,
                            mw: Some(w.clone()),
                        }
                    }
                    None if self.mw_file(&peer, w).is_none() => {
                        let hint = name_hint(
                            w,
                            self.f.mws.iter().filter(|x| *x.on == peer).map(|x| x.name.as_str()),
                        );
                        self.err(
                            at,
                            format!("no memory window `{w}` on `{peer}`, the other end of `{qp}`"),
                            hint,
                        );
                        RemoteRef {
                            mr: String::new(),
                            offset: r.offset,
                            rkey: r.rkey,
                            mw: Some(w.clone()),
                        }
                    }
                    None => {
                        self.err(
                            at,
                            format!(
                                "memory window `{w}` of `{peer}` is not bound before this step"
                            ),
                            Some("bind it first: a step `op = \"bind_mw\"` on its endpoint".into()),
                        );
                        RemoteRef {
                            mr: String::new(),
                            offset: r.offset,
                            rkey: r.rkey,
                            mw: Some(w.clone()),
                        }
                    }
                }
            }
            _ => {
                self.err(at, "say which remote memory: `mr = \"…\"` (an MR of the peer) or `mw = \"…\"` (a memory window of the peer), one of them", None);
                RemoteRef { mr: String::new(), offset: r.offset, rkey: r.rkey, mw: None }
            }
        }
    }

    /// The size of the MR a remote end lies in (0 when there is none).
    pub(super) fn remote_size(&self, on: &str, qp: &str, r: &RemoteRef) -> u64 {
        self.peer_of(on, qp).and_then(|p| self.mr_file(&p, &r.mr)).map_or(0, |m| m.size.value)
    }

    /// A step on an SRQ of its own endpoint.
    pub(super) fn srq_step(&mut self, s: &file::StepFile, on: &str, srq: &str) -> bool {
        if !self.endpoint_ok(s.at("on"), on) {
            return false;
        }
        match self.srq_file(srq) {
            None => {
                let hint = name_hint(srq, self.f.srqs.iter().map(|x| x.name.as_str()));
                self.err(Some(s.at("srq")), format!("no SRQ `{srq}`"), hint);
                false
            }
            Some(x) if *x.on != on => {
                self.err(
                    Some(s.at("on")),
                    format!("SRQ `{srq}` is on `{}`, not on `{on}`", *x.on),
                    None,
                );
                false
            }
            Some(_) => true,
        }
    }

    /// The QP a step names, posted on by one of its ends.
    pub(super) fn qp_step(
        &mut self,
        _i: usize,
        s: &file::StepFile,
        on: &str,
        qp: &str,
    ) -> Option<&'a file::QpFile> {
        if !self.endpoint_ok(s.at("on"), on) {
            return None;
        }
        let f = self.f;
        if let Some(&n) = self.groups.get(qp) {
            let hint = format!("a step names one of them, `{qp}[0]` to `{qp}[{}]`; a stream on `{qp}` takes them all", n - 1);
            self.err(Some(s.at("qp")), format!("`{qp}` is {n} QPs (`count = {n}`)"), Some(hint));
            return None;
        }
        let Some(q) = f.qps.iter().find(|q| *q.name == qp) else {
            let hint = name_hint(qp, f.qps.iter().map(|q| q.name.as_str()));
            self.err(Some(s.at("qp")), format!("no QP `{qp}`"), hint);
            return None;
        };
        if !q.between.iter().any(|e| e == on) {
            self.err(
                Some(s.at("on")),
                format!(
                    "QP `{qp}` is between {} and {}, not on `{on}`",
                    q.between[0], q.between[1]
                ),
                None,
            );
            return None;
        }
        Some(q)
    }

    pub(super) fn sges(
        &mut self,
        s: &file::StepFile,
        on: &str,
        sge: &[file::Sge],
        atomic: bool,
        _kind: QpType,
    ) -> Vec<SgeRef> {
        let mut out = Vec::new();
        for (j, g) in sge.iter().enumerate() {
            let Some(m) = self.mr_file(on, &g.mr) else {
                let hint = name_hint(&g.mr, self.mr_names_on(on));
                self.err(
                    Some(s.at("sge")),
                    format!("SGE {}: no MR `{}` on `{on}`", j + 1, g.mr),
                    hint,
                );
                continue;
            };
            let size = m.size.value;
            let len = g.len.map(u64::from).unwrap_or(size.saturating_sub(g.offset));
            let end = g.offset.saturating_add(len);
            let guard = crate::vocab::memory::GUARD as u64;
            if end > size && !g.outside_mr {
                self.err(
                    Some(s.at("sge")),
                    format!(
                        "SGE {}: {}+{len} runs past the end of MR `{}` ({size} bytes)",
                        j + 1,
                        g.offset,
                        g.mr
                    ),
                    Some("to see the device refuse an SGE outside its MR (mr.bounds.local-sge), say `outside_mr = true` on it".into()),
                );
            } else if end > size + guard {
                self.err(
                    Some(s.at("sge")),
                    format!(
                        "SGE {}: {}+{len} runs {} bytes past the end of MR `{}`; `outside_mr` reaches at most {guard} past it",
                        j + 1,
                        g.offset,
                        end - size,
                        g.mr
                    ),
                    Some("the agent keeps a guard region of that size after each MR, so a device that fails to refuse the SGE touches nothing of its own".into()),
                );
            }
            if atomic && len != 8 {
                self.err(
                    Some(s.at("sge")),
                    "an atomic's local buffer is 8 bytes (the old value lands there)",
                    Some("len = 8".into()),
                );
            }
            out.push(SgeRef {
                mr: g.mr.clone(),
                offset: g.offset,
                len: len.min(u32::MAX as u64) as u32,
                outside_mr: g.outside_mr,
            });
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn post(
        &mut self,
        i: usize,
        s: &file::StepFile,
        on: &str,
        qp: &str,
        wr_id: u64,
        sge: &[file::Sge],
        flags: &[String],
        verb: Verb,
    ) -> Option<Step> {
        let q = self.qp_step(i, s, on, qp)?;
        let peer = if q.between[0] == on { q.between[1].clone() } else { q.between[0].clone() };
        let remote = verb.remote();
        let atomic = matches!(verb, Verb::CmpSwap { .. } | Verb::FetchAdd { .. });
        let rc_only =
            matches!(verb, Verb::AtomicWrite { .. } | Verb::Flush { .. } | Verb::SendInv { .. });
        let op = verb.op();
        // A step that expects the device to refuse it asks on purpose.
        let on_purpose = matches!(&s.outcome, Ok(o) if o.expect.as_deref() == Some("refused"));
        // Not even on purpose on UD: its provider reads every send WR's address
        // handle, so such a WR is never passed to it (the device cannot answer).
        if q.qp_type == QpType::Ud && (remote.is_some() || !matches!(verb, Verb::Send { .. })) {
            self.err(
                Some(s.at("op")),
                format!("{op} on UD QP `{qp}`: UD carries SENDs only"),
                Some("a UD provider reads every send WR's address handle, so no other operation is handed to it, even to see it refused".into()),
            );
        }
        if q.qp_type == QpType::Uc
            && !on_purpose
            && (matches!(verb, Verb::Read { .. }) || atomic || rc_only)
        {
            self.err(Some(s.at("op")), format!("{op} on UC QP `{qp}`: UC has no READ, atomics, ATOMIC WRITE, FLUSH or SEND with Invalidate"), Some("use an RC QP (or, to see the device refuse it, say `expect = \"refused\"`)".into()));
        }
        let kind = q.qp_type;
        let sges = self.sges(s, on, sge, atomic, kind);
        if let Some(r) = remote.filter(|r| r.mw.is_none()) {
            match self.mr_file(&peer, &r.mr).map(|m| m.size.value) {
                None => {
                    let hint = name_hint(&r.mr, self.mr_names_on(&peer));
                    self.err(
                        Some(s.at("remote")),
                        format!("no MR `{}` on `{peer}`, the other end of `{qp}`", r.mr),
                        hint,
                    )
                }
                Some(size) if r.offset >= size as i64 && r.rkey.is_none() => self.err(
                    Some(s.at("remote")),
                    format!("offset {} is past the end of MR `{}` ({size} bytes)", r.offset, r.mr),
                    Some("to provoke a NAK on purpose, set `rkey` too".into()),
                ),
                Some(_) => {}
            }
        }
        if let Some(r) = remote {
            if (atomic || matches!(verb, Verb::AtomicWrite { .. })) && r.offset % 8 != 0 {
                self.err(
                    Some(s.at("remote")),
                    "atomics need an 8-byte aligned remote address",
                    None,
                );
            }
        }
        let mut fl = Vec::new();
        for f in flags {
            match f.parse::<SendFlag>() {
                Ok(x) => fl.push(x),
                Err(e) => self.err(Some(s.at("flags")), format!("unknown flag `{f}`"), e.hint()),
            }
        }
        Some(act(on, Action::Post { qp: qp.to_string(), wr_id, verb, sges, flags: fl }))
    }

    /// A step that waits (`sleep`, `wait_completions`, `await_notify`): when the
    /// waits up to it reach the scenario's timeout, the run will stop at its
    /// deadline there. Said as a warning at the step that crosses it (files that
    /// loaded before still load); a probe's settle is held harder
    /// ([`Self::check_settle`]).
    fn check_wait(&mut self, s: &file::StepFile, key: &str, ms: u64, seen: &mut Seen) {
        let (before, timeout) = (seen.waited, seen.timeout_ms);
        seen.waited = before.saturating_add(ms);
        if before < timeout && seen.waited >= timeout {
            let mut d = self.src.diag(
                Some(s.at(key)),
                format!(
                    "the waits up to this step add up to {} ms, not less than the scenario's {timeout} ms timeout: the run stops at its deadline here",
                    seen.waited
                ),
                Some("wait less, or raise `timeout_ms` at the top of the file".into()),
            );
            d.severity = super::Severity::Warning;
            self.warnings.push(d);
        }
    }

    /// A probe's wait must be sane on its own, and the probes' waits together must
    /// leave the scenario time to finish (reported at the probe that overruns).
    pub(super) fn check_settle(&mut self, s: &file::StepFile, ms: u64, before: u64, timeout: u64) {
        let at = Some(s.at("probe"));
        if ms > MAX_SETTLE_MS {
            let hint = "it is how long the step waits after sending for the target's answer to reach the wire";
            self.err(
                at,
                format!("a probe waits at most {MAX_SETTLE_MS} ms, not {ms}"),
                Some(hint.into()),
            );
            return;
        }
        if before < timeout && before + ms >= timeout {
            self.err(
                at,
                format!("the probes up to this one wait {} ms in all, not less than the scenario's {timeout} ms timeout", before + ms),
                Some("wait less, or raise `timeout_ms` at the top of the file".into()),
            );
        }
    }
}

/// Endpoint `on`'s agent carries `action` out.
fn act(on: &str, action: Action) -> Step {
    Step::Act { on: on.to_string(), action }
}

/// The `op` a step names.
fn op_name(op: &StepOp) -> &'static str {
    match op {
        StepOp::Sync {} => "sync",
        StepOp::Sleep { .. } => "sleep",
        StepOp::WaitCompletions { .. } => "wait_completions",
        StepOp::Stream { .. } => "stream",
        StepOp::Probe { .. } => "probe",
        _ => "step",
    }
}
