//! Expectations (`[[expect.*]]`) and fault rules (`[[fault]]`): what the judge
//! holds the run to, and what the lab switch does to its frames.
//!
//! Owns: the `impl Checker` for expectations and faults, and `count_range`. Imports:
//! the checker's vocabulary (`use super::*`), the lab's fault-rule parser
//! (`lab::fault`).
use super::*;

/// `"0..10"`, `"5.."`, `"..3"`, `"2"`: a count between two bounds, both included.
pub(super) fn count_range(text: &str) -> Result<(u64, u64), String> {
    let num = |t: &str, empty: u64| -> Result<u64, String> {
        let t = t.trim();
        if t.is_empty() {
            return Ok(empty);
        }
        t.parse().map_err(|_| format!("`{t}` is not a count"))
    };
    let (lo, hi) = match text.split_once("..") {
        Some((a, b)) => (num(a, 0)?, num(b.strip_prefix('=').unwrap_or(b), u64::MAX)?),
        None => {
            let n = num(text, 0)?;
            (n, n)
        }
    };
    if lo > hi {
        return Err(format!("the range `{text}` is empty"));
    }
    Ok((lo, hi))
}

impl<'a> Checker<'a> {
    pub(super) fn faults(&mut self) -> Vec<Fault> {
        let mut out = Vec::new();
        for fl in &self.f.faults {
            if let Some(e) = &fl.from {
                self.endpoint_ok(e.span.clone(), e);
            }
            let q = fl.qp.as_ref().and_then(|n| {
                let found = self.qp_file(n);
                if found.is_none() {
                    let hint = name_hint(n, self.f.qps.iter().map(|q| q.name.as_str()));
                    self.err(Some(n.span.clone()), format!("no QP `{}`", n.value), hint);
                }
                found
            });
            if let (Some(q), Some(from)) = (q, &fl.from) {
                if !q.between.contains(&from.value) {
                    self.err(
                        Some(from.span.clone()),
                        format!(
                            "QP `{}` is between {} and {}, not on `{}`",
                            *q.name, q.between[0], q.between[1], from.value
                        ),
                        None,
                    );
                }
            }
            let span = Some(fl.rule.span.clone());
            match lab::fault::parse_rule(&fl.rule) {
                Err(e) => {
                    let tok = e.input.get(e.span.clone()).unwrap_or("");
                    self.err(
                        span,
                        format!("fault rule: {} (at `{tok}`)", e.message),
                        e.hint.clone(),
                    )
                }
                Ok(r) => {
                    if r.dir.is_some() {
                        self.err(
                            span.clone(),
                            "`dir=` in a scenario's fault rule",
                            Some("say `from = \"a\"`: the endpoint whose frames it touches".into()),
                        );
                    }
                    if r.qp.is_some() {
                        self.err(
                            span.clone(),
                            "`qp=` in a scenario's fault rule",
                            Some("say `qp = \"q\"`: its QPN is learned at setup".into()),
                        );
                    }
                    if let lab::fault::Action::Respond(resp) = &r.action {
                        if resp.reply_qp.is_some() {
                            self.err(
                                span.clone(),
                                "`reply-qp=` in a scenario's fault rule",
                                Some(
                                    "the requester's QPN is learned at setup from `qp` and `from`"
                                        .into(),
                                ),
                            );
                        }
                        if fl.from.is_none() || fl.qp.is_none() {
                            self.err(
                                span.clone(),
                                "`respond` answers one requester: it needs `from` and `qp`",
                                Some("add `from = \"a\"` (the endpoint whose requests it answers) and `qp = \"q\"`".into()),
                            );
                        }
                        if let Some(q) = q.filter(|q| q.qp_type != QpType::Rc) {
                            self.err(span.clone(), format!("`respond` on QP `{}`, which is {:?}: only RC requests draw responses", *q.name, q.qp_type).replace("Uc", "UC").replace("Ud", "UD"), None);
                        }
                    }
                    if let (Some(_), Some(q)) = (&r.psn, q) {
                        if q.connect == ConnectMethod::RdmaCm {
                            self.err(
                                span.clone(),
                                format!(
                                    "`psn=` on QP `{}`, whose starting PSNs rdma_cm chooses",
                                    *q.name
                                ),
                                Some("match by `op=` and `nth=`, or connect it with `tcp`".into()),
                            );
                        } else if q.psn.is_none() {
                            self.err(
                                span.clone(),
                                format!(
                                    "`psn=` on QP `{}`, whose starting PSNs are random",
                                    *q.name
                                ),
                                Some("set them: `psn = { a = 100, b = 500 }` on the QP".into()),
                            );
                        }
                    }
                    out.push(Fault {
                        rule: r,
                        text: fl.rule.value.trim().to_string(),
                        from: fl.from.as_ref().map(|f| f.value.clone()),
                        qp: fl.qp.as_ref().map(|q| q.value.clone()),
                    });
                }
            }
        }
        out
    }

    pub(super) fn patterns(
        &mut self,
        list: &Option<Vec<Spanned<String>>>,
        what: &str,
    ) -> Option<Vec<Pattern>> {
        let list = list.as_ref()?;
        let mut out = Vec::new();
        for p in list {
            match p.parse::<Pattern>() {
                Ok(x) => out.push(x),
                Err(e) => self.pattern_error(p, e, what),
            }
        }
        Some(out)
    }

    /// Says why `p` is no item of a sequence, at the place in the item.
    fn pattern_error(&mut self, p: &Spanned<String>, e: PatternError, what: &str) {
        match e {
            PatternError::Name(mut e) => {
                if what == "responses" {
                    e.what = "response";
                }
                let m = format!("unknown {} `{}`", e.what, e.name);
                if let Some(fixed) =
                    repeat_at_the_end(&p.value, &e.name).filter(|_| what != "order")
                {
                    let hint = format!("`*` and `+` go at the very end of an item and repeat the whole of it (every `|` alternative, the `{{…}}` condition): `{fixed}`");
                    return self.err(Some(p.span.clone()), m, Some(hint));
                }
                match e.hint() {
                    Some(hint) => self.err(Some(p.span.clone()), m, Some(hint)),
                    None => self.err(Some(p.span.clone()), format!("{m}: {ATOMS}"), None),
                }
            }
            PatternError::Filter { at, error } => {
                // The span is the string's, quote included; the caret goes to the
                // filter's own error inside it (a string with escapes: near it).
                let start = p.span.start + 1 + at + error.span.start;
                let end = start + error.span.len().max(1);
                let span = if end < p.span.end { start..end } else { p.span.clone() };
                let hint = error.kind.hint().map(|h| {
                    format!("{h}; the condition in braces is a display filter, as `roce decode -Y` takes it")
                });
                self.err(
                    Some(span),
                    format!("in the condition of `{}`: {}", p.value, error.kind),
                    hint,
                )
            }
            PatternError::Braces(m) => self.err(
                Some(p.span.clone()),
                format!("`{}`: {m}", p.value),
                Some(
                    "e.g. `SEND Only {infiniband.bth.se == 1}`, `ACK {infiniband.aeth.msn == 2}+`"
                        .into(),
                ),
            ),
        }
    }

    pub(super) fn expectations(&mut self, mrs: &[Mr], steps: &[Step]) -> Expectations {
        let mut e = Expectations::default();
        self.expect_completions(&mut e);
        self.expect_wire(&mut e);
        self.expect_probes(&mut e);
        self.expect_events(&mut e);
        self.expect_memory(&mut e, mrs, steps);
        self.expect_streams(&mut e, steps);
        self.expect_order(&mut e);
        self.expect_counters(&mut e);
        let n = e.conditions().len();
        if n > MAX_CONDITIONS {
            self.err(
                None,
                format!("{n} different header conditions (`{{…}}`) in one scenario; at most {MAX_CONDITIONS}"),
                Some("split the scenario, or say one condition once and reuse it".into()),
            );
        }
        e
    }

    /// `psns = "consecutive"` or a list of PSNs (absolute, `first`, `first+N`).
    fn psns(&mut self, p: &Spanned<PsnsFile>) -> Option<Psns> {
        let hint = || {
            Some(
                "say \"consecutive\", or a list like [16777215, 0] or [\"first\", \"first+1\"]"
                    .into(),
            )
        };
        match &p.value {
            PsnsFile::Word(w) if w.trim() == "consecutive" => Some(Psns::Consecutive),
            PsnsFile::Word(w) => {
                self.err(Some(p.span.clone()), format!("`{w}` is not a PSN list"), hint());
                None
            }
            PsnsFile::List(l) => {
                let each: Result<Vec<WirePsn>, String> = l.iter().map(wire_psn).collect();
                match each {
                    Ok(v) => Some(Psns::Each(v)),
                    Err(m) => {
                        self.err(Some(p.span.clone()), m, hint());
                        None
                    }
                }
            }
        }
    }

    /// `[[expect.order]]`: the order of frames across a QP pair's two directions.
    fn expect_order(&mut self, e: &mut Expectations) {
        let f = self.f;
        for o in &f.expect.order {
            if self.qp_file(&o.qp).is_none() {
                let hint = name_hint(&o.qp, f.qps.iter().map(|q| q.name.as_str()));
                self.err(Some(o.qp.span.clone()), format!("no QP `{}`", o.qp.value), hint);
            }
            let one = |c: &mut Self, x: &Spanned<String>| -> Option<Pattern> {
                let p = c.patterns(&Some(vec![x.clone()]), "order")?.pop()?;
                if p.repeat != Repeat::One {
                    c.err(
                        Some(x.span.clone()),
                        format!("`{}`: an order names one frame, without `*` or `+`", x.value),
                        None,
                    );
                    return None;
                }
                Some(p)
            };
            let (first, then) = (one(self, &o.first), one(self, &o.then));
            if let (Some(first), Some(then)) = (first, then) {
                e.order.push(OrderExpect {
                    qp: o.qp.value.clone(),
                    first,
                    then,
                    record_deviation: o.record_deviation == Some(true),
                });
            }
        }
    }

    /// `[[expect.completion]]`: which work completions each endpoint sees.
    fn expect_completions(&mut self, e: &mut Expectations) {
        let f = self.f;
        for c in &f.expect.completion {
            self.endpoint_ok(c.on.span.clone(), &c.on);
            if c.wr_id.is_none() && c.index.is_none() && c.count.is_none() {
                self.err(
                    Some(c.on.span.clone()),
                    "say which completion: `wr_id`, `index`, or a `count`",
                    None,
                );
            }
            let status = c.status.as_ref().and_then(|s| match s.parse::<WcStatus>() {
                Ok(x) => Some(x),
                Err(er) => {
                    self.err(
                        Some(s.span.clone()),
                        format!("unknown status `{}`", s.value),
                        er.hint(),
                    );
                    None
                }
            });
            let opcode = c.opcode.as_ref().and_then(|s| match s.parse::<WcOpcode>() {
                Ok(x) => Some(x),
                Err(er) => {
                    self.err(
                        Some(s.span.clone()),
                        format!("unknown completion opcode `{}`", s.value),
                        er.hint(),
                    );
                    None
                }
            });
            if let Some(w) = &c.invalidated {
                if self.mw_file(&c.on, w).is_none() {
                    let hint = name_hint(
                        w,
                        f.mws.iter().filter(|x| *x.on == *c.on).map(|x| x.name.as_str()),
                    );
                    self.err(
                        Some(w.span.clone()),
                        format!("no memory window `{}` on `{}`", w.value, c.on.value),
                        hint,
                    );
                }
            }
            let src_qp = c.src_qp.as_ref().and_then(|n| self.src_qp(&c.on, n));
            e.completion.push(CompletionExpect {
                on: c.on.value.clone(),
                wr_id: c.wr_id,
                index: c.index,
                status,
                opcode,
                byte_len: c.byte_len,
                imm_data: c.imm_data,
                invalidated: c.invalidated.as_ref().map(|w| w.value.clone()),
                src_qp,
                grh: c.grh,
                pkey_index: c.pkey_index,
                count: c.count,
                within_ms: c.within_ms,
                record_deviation: c.record_deviation == Some(true),
            });
        }
    }

    /// A completion's `src_qp = "u"` on `on`: the QP named, at its end other than
    /// `on` (the sender). Its QPN is known only at run time, so the judge looks it
    /// up there; here the name must be a UD QP of `on`'s.
    fn src_qp(&mut self, on: &Spanned<String>, n: &Spanned<String>) -> Option<QpOn> {
        let f = self.f;
        let Some(q) = self.qp_file(n) else {
            let hint = match self.groups.get(&n.value) {
                Some(k) => Some(format!(
                    "`{0}` is a group of {k} QPs: name one of them, `{0}[0]` to `{0}[{1}]`",
                    n.value,
                    k.saturating_sub(1)
                )),
                None => name_hint(n, f.qps.iter().map(|q| q.name.as_str())),
            };
            self.err(Some(n.span.clone()), format!("no QP `{}`", n.value), hint);
            return None;
        };
        if !q.between.contains(&on.value) {
            self.err(
                Some(n.span.clone()),
                format!(
                    "QP `{}` is between {} and {}, not on `{}`",
                    n.value, q.between[0], q.between[1], on.value
                ),
                Some(format!(
                    "`src_qp` names a QP of `{}`, whose completion it is: the sender is its other end",
                    on.value
                )),
            );
            return None;
        }
        if q.qp_type != QpType::Ud {
            let kind = if q.qp_type == QpType::Rc { "RC" } else { "UC" };
            self.err(
                Some(n.span.clone()),
                format!("`src_qp` on QP `{}`, which is {kind}: only a UD completion reports its source QP (ibv_wc.src_qp)", n.value),
                None,
            );
            return None;
        }
        let other = if q.between[0] == on.value { &q.between[1] } else { &q.between[0] };
        Some(QpOn { qp: n.value.clone(), on: other.clone() })
    }

    /// `[[expect.wire]]`: what the capture shows of a QP in one direction.
    fn expect_wire(&mut self, e: &mut Expectations) {
        let f = self.f;
        for w in &f.expect.wire {
            match self.qp_file(&w.qp) {
                None => {
                    let hint = name_hint(&w.qp, f.qps.iter().map(|q| q.name.as_str()));
                    self.err(Some(w.qp.span.clone()), format!("no QP `{}`", w.qp.value), hint)
                }
                Some(q) if !q.between.contains(&w.from.value) => self.err(
                    Some(w.from.span.clone()),
                    format!(
                        "`{}` is not an end of QP `{}` ({} and {})",
                        w.from.value, w.qp.value, q.between[0], q.between[1]
                    ),
                    None,
                ),
                _ => {}
            }
            let sequence = self.patterns(&w.sequence, "sequence");
            let responses = self.patterns(&w.responses, "responses");
            let psns = w.psns.as_ref().and_then(|p| self.psns(p));
            let response_psns = w.response_psns.as_ref().and_then(|p| self.psns(p));
            let naks = w.naks.as_ref().map(|l| {
                l.iter()
                    .filter_map(|n| match n.parse::<NakKind>() {
                        Ok(k) => Some(k),
                        Err(_) => {
                            let keys: Vec<&str> = NakKind::all().map(|k| k.key()).collect();
                            self.err(
                                Some(n.span.clone()),
                                format!("unknown NAK `{}`", n.value),
                                name_hint(&n.value, keys.iter().copied()),
                            );
                            None
                        }
                    })
                    .collect()
            });
            e.wire.push(WireExpect {
                qp: w.qp.value.clone(),
                from: w.from.value.clone(),
                sequence,
                responses,
                psns,
                response_psns,
                naks,
                min_rnr_naks: w.min_rnr_naks,
                rnr_naks: w.rnr_naks.as_ref().and_then(|r| match count_range(r) {
                    Ok(x) => Some(x),
                    Err(m) => {
                        self.err(
                            Some(r.span.clone()),
                            m,
                            Some("both ends included: \"0..10\", \"5..\", \"..3\" or \"2\"".into()),
                        );
                        None
                    }
                }),
                retransmissions: w.retransmissions,
                max_retransmissions: w.max_retransmissions,
                icrc_valid: match w.icrc_valid {
                    None => Some(true),
                    Some(super::file::IcrcValid::Judged(b)) => Some(b),
                    Some(super::file::IcrcValid::Any(_)) => None,
                },
                empty: w.empty == Some(true),
                go_back_n: w.go_back_n == Some(true),
                cnp: w.cnp,
                retransmit_within_ms: w.retransmit_within_ms,
                rnr_timer_honoured: w.rnr_timer_honoured == Some(true),
                ack_timeout: w.ack_timeout == Some(true),
                record_deviation: w.record_deviation == Some(true),
            });
        }
    }

    /// `[[expect.probe]]`: what answered each crafted frame.
    fn expect_probes(&mut self, e: &mut Expectations) {
        let f = self.f;
        let probe_ids: Vec<String> = f
            .steps
            .iter()
            .filter_map(|s| match &s.op {
                Ok(StepOp::Probe { probe, .. }) => Some(probe.id.clone()),
                _ => None,
            })
            .collect();
        for p in &f.expect.probe {
            if !probe_ids.contains(&p.probe.value) {
                self.err(
                    Some(p.probe.span.clone()),
                    format!("no probe `{}`", p.probe.value),
                    name_hint(&p.probe, probe_ids.iter().map(String::as_str)),
                );
            }
            let responses = self.patterns(&p.responses, "responses");
            let psn = p.psn.as_ref().and_then(|x| match psn_at(x) {
                Ok(v) => Some(v),
                Err(m) => {
                    self.err(Some(x.span.clone()), m, None);
                    None
                }
            });
            if p.responses.is_none() && p.psn.is_none() && p.within_ms.is_none() {
                self.err(
                    Some(p.probe.span.clone()),
                    "say what the answer must be: `responses`, `psn` or `within_ms`",
                    None,
                );
            }
            e.probe.push(ProbeExpect {
                probe: p.probe.value.clone(),
                responses,
                psn,
                within_ms: p.within_ms,
                record_deviation: p.record_deviation == Some(true),
            });
        }
    }

    /// `[[expect.counters]]`: what a device counter moves by.
    fn expect_counters(&mut self, e: &mut Expectations) {
        let f = self.f;
        for v in &f.expect.counters {
            self.endpoint_ok(v.on.span.clone(), &v.on);
            let name = v.counter.value.trim();
            if name.is_empty() || name.contains(['/', '\0']) || name.starts_with('.') {
                self.err(
                    Some(v.counter.span.clone()),
                    format!("`{}` is not a counter's name", v.counter.value),
                    Some("the name of a file in the port's `hw_counters` (or `counters`) directory, as `roce run` prints them: `sent_pkts`".into()),
                );
            }
            let (min, max) = match (&v.value, &v.min, &v.max) {
                (Some(x), None, None) => (Some(x.value), Some(x.value)),
                (None, None, None) => {
                    self.err(
                        Some(v.counter.span.clone()),
                        format!("say what counter `{}` should move by", v.counter.value),
                        Some("`value = 1`, or `min = …` and/or `max = …`".into()),
                    );
                    (None, None)
                }
                (Some(x), _, _) => {
                    self.err(
                        Some(x.span.clone()),
                        "`value` is exact: give it alone, or `min`/`max` instead",
                        None,
                    );
                    (None, None)
                }
                (None, a, b) => {
                    if let (Some(a), Some(b)) = (a, b) {
                        if a.value > b.value {
                            self.err(
                                Some(b.span.clone()),
                                format!("`max = {}` is below `min = {}`", b.value, a.value),
                                None,
                            );
                        }
                    }
                    (a.as_ref().map(|x| x.value), b.as_ref().map(|x| x.value))
                }
            };
            e.counters.push(CounterExpect {
                on: v.on.value.clone(),
                counter: name.to_string(),
                min,
                max,
                record_deviation: v.record_deviation == Some(true),
            });
        }
    }

    /// `[[expect.event]]`: asynchronous events on an endpoint.
    fn expect_events(&mut self, e: &mut Expectations) {
        let f = self.f;
        for v in &f.expect.event {
            self.endpoint_ok(v.on.span.clone(), &v.on);
            let kind = match v.event.parse::<EventType>() {
                Ok(k) => k,
                Err(er) => {
                    self.err(
                        Some(v.event.span.clone()),
                        format!("unknown event `{}`", v.event.value),
                        er.hint(),
                    );
                    EventType(0)
                }
            };
            if let Some(n) = &v.srq {
                match self.srq_file(n) {
                    Some(x) if *x.on == *v.on => {}
                    Some(x) => self.err(
                        Some(n.span.clone()),
                        format!("SRQ `{}` is on `{}`, not on `{}`", n.value, *x.on, v.on.value),
                        None,
                    ),
                    None => {
                        let hint = name_hint(n, f.srqs.iter().map(|x| x.name.as_str()));
                        self.err(Some(n.span.clone()), format!("no SRQ `{}`", n.value), hint)
                    }
                }
            }
            if let Some(n) = &v.qp {
                match self.qp_file(n) {
                    Some(q) if q.between.contains(&v.on.value) => {}
                    Some(q) => self.err(
                        Some(n.span.clone()),
                        format!(
                            "QP `{}` is between {} and {}, not on `{}`",
                            n.value, q.between[0], q.between[1], v.on.value
                        ),
                        None,
                    ),
                    None => {
                        let hint = name_hint(n, f.qps.iter().map(|q| q.name.as_str()));
                        self.err(Some(n.span.clone()), format!("no QP `{}`", n.value), hint)
                    }
                }
            }
            e.event.push(EventExpect {
                on: v.on.value.clone(),
                kind,
                srq: v.srq.as_ref().map(|n| n.value.clone()),
                qp: v.qp.as_ref().map(|n| n.value.clone()),
                count: v.count,
                record_deviation: v.record_deviation == Some(true),
            });
        }
    }

    /// `[[expect.memory]]`: what an MR holds at the end.
    fn expect_memory(&mut self, e: &mut Expectations, mrs: &[Mr], steps: &[Step]) {
        let f = self.f;
        for m in &f.expect.memory {
            if !self.endpoint_ok(m.on.span.clone(), &m.on) {
                continue;
            }
            match mrs.iter().find(|x| x.on == *m.on && x.name == *m.mr) {
                None => {
                    let hint = name_hint(&m.mr, self.mr_names_on(&m.on));
                    self.err(
                        Some(m.mr.span.clone()),
                        format!("no MR `{}` on `{}`", m.mr.value, m.on.value),
                        hint,
                    )
                }
                Some(r) => {
                    if let Some(c) = &m.equals {
                        match c.try_bytes(r.size.saturating_sub(m.offset) as usize) {
                            Ok(b) if m.offset + b.len() as u64 > r.size => self.err(
                                Some(c.span.clone()),
                                format!(
                                    "{} bytes at offset {} run past the end of MR `{}` ({} bytes)",
                                    b.len(),
                                    m.offset,
                                    r.name,
                                    r.size
                                ),
                                None,
                            ),
                            Ok(_) => {}
                            Err(er) => self.err(Some(c.span.clone()), er, None),
                        }
                    }
                }
            }
            if let Some(o) = &m.outside {
                if o.value == "unchanged" {
                    e.outside.push(OutsideExpect {
                        on: m.on.value.clone(),
                        mr: m.mr.value.clone(),
                        record_deviation: m.record_deviation == Some(true),
                    });
                } else {
                    let hint = Some("`outside = \"unchanged\"`: the guard regions on both sides of the MR still hold their canary".to_string());
                    self.err(
                        Some(o.span.clone()),
                        format!(
                            "unknown `outside` `{}`: what is outside an MR can only be `unchanged`",
                            o.value
                        ),
                        hint,
                    );
                }
                if m.equals.is_none()
                    && m.unchanged.is_none()
                    && m.stream.is_none()
                    && m.probe_writes.is_none()
                {
                    continue;
                }
            }
            let landed = match &m.probe_writes {
                Some(w) if w.value == "landed" => true,
                Some(w) => {
                    self.err(
                        Some(w.span.clone()),
                        format!("unknown `probe_writes` `{}`: what acknowledged probe WRITEs did can only be `landed`", w.value),
                        Some("`probe_writes = \"landed\"`: each crafted WRITE the target acknowledged placed its payload".into()),
                    );
                    false
                }
                None => false,
            };
            if landed && (m.equals.is_some() || m.unchanged.is_some() || m.stream.is_some()) {
                self.err(
                    Some(m.mr.span.clone()),
                    "`probe_writes` stands alone (or beside `outside`): give `equals`, `unchanged` or `stream` an expectation of their own",
                    None,
                );
                continue;
            }
            let stream = m.stream.as_ref().map(|id| (id, stream_step(steps, id)));
            let mut offset = m.offset;
            let want = match (&m.equals, m.unchanged.unwrap_or(false), stream) {
                _ if landed => Memory::ProbeWritesLanded,
                (Some(c), false, None) => Memory::Equals(c.value.clone()),
                (None, true, None) => Memory::Unchanged,
                (None, false, Some((id, None))) => {
                    self.err(
                        Some(id.span.clone()),
                        format!("no stream step named `{}`", id.value),
                        None,
                    );
                    Memory::Unchanged
                }
                (None, false, Some((id, Some(st)))) => {
                    // Where the stream's messages land: the peer's MR for a WRITE, the
                    // poster's for a READ.
                    let at = match st.order.verb {
                        StreamVerb::Write | StreamVerb::WriteImm => st
                            .order
                            .remote
                            .as_ref()
                            .map(|r| (&st.peer, &r.mr, r.offset.unsigned_abs())),
                        StreamVerb::Read => {
                            Some((&st.on, &st.order.local_mr, st.order.local_offset))
                        }
                        StreamVerb::Atomic { .. } | StreamVerb::Send | StreamVerb::Receive => None,
                    };
                    match at {
                        None if st.order.verb == StreamVerb::Send => {
                            self.err(Some(id.span.clone()), format!("stream `{}` sends: the peer checks each message as it arrives (its receives reuse their slots)", id.value), Some("leave this out: the stream's own verdict says whether every message arrived as seeded".into()))
                        }
                        None => self.err(Some(id.span.clone()), format!("stream `{}` adds to one word: say what it must hold, `equals = {{ u64 = … }}`", id.value), None),
                        Some((on, mr, off)) if *on != *m.on || *mr != *m.mr || (m.offset != 0 && m.offset != off) => self.err(
                            Some(id.span.clone()),
                            format!("stream `{}` lands in MR `{mr}` on `{on}` from offset {off}", id.value),
                            Some(format!("on = \"{on}\", mr = \"{mr}\"")),
                        ),
                        Some((_, _, off)) => offset = off,
                    }
                    Memory::Stream { id: id.value.clone(), content: st.order.content }
                }
                _ => {
                    self.err(Some(m.mr.span.clone()), "say what the memory holds: `equals = …`, `unchanged = true`, `stream = \"…\"` or `probe_writes = \"landed\"` (one of them; `outside = \"unchanged\"` may stand beside it or alone)", None);
                    Memory::Unchanged
                }
            };
            if !matches!(want, Memory::Stream { .. }) {
                if let Some(r) = mrs
                    .iter()
                    .find(|x| x.on == *m.on && x.name == *m.mr)
                    .filter(|r| r.size > READ_BACK_MAX)
                {
                    self.err(
                        Some(m.mr.span.clone()),
                        format!("MR `{}` has {} bytes: MRs larger than {READ_BACK_MAX} are not read back whole", r.name, r.size),
                        Some("check what a stream wrote with `stream = \"…\"`, or use a smaller MR".into()),
                    );
                }
            }
            e.memory.push(MemoryExpect {
                on: m.on.value.clone(),
                mr: m.mr.value.clone(),
                offset,
                want,
                record_deviation: m.record_deviation == Some(true),
            });
        }
    }

    /// `[[expect.stream]]`, and the default for a stream nothing is said of: it
    /// completes, all of it.
    fn expect_streams(&mut self, e: &mut Expectations, steps: &[Step]) {
        let f = self.f;
        for x in &f.expect.stream {
            match stream_step(steps, &x.id) {
                None => {
                    let ids = streams(steps).map(|st| st.order.id.as_str());
                    let hint = name_hint(&x.id, ids);
                    self.err(
                        Some(x.id.span.clone()),
                        format!("no stream step named `{}`", x.id.value),
                        hint,
                    );
                }
                Some(st) => {
                    let completed = x.completed.unwrap_or(st.order.content.count);
                    if completed > st.order.content.count {
                        self.err(
                            Some(x.id.span.clone()),
                            format!(
                                "{completed} completed of a stream of {}",
                                st.order.content.count
                            ),
                            None,
                        );
                    }
                    e.stream.push(StreamExpect {
                        id: st.order.id.clone(),
                        on: st.on.clone(),
                        completed,
                        max_ack_latency_ms: x.max_ack_latency_ms,
                    });
                }
            }
        }
        // A stream nothing is said of must complete, all of it: a message on the
        // wire is not a message done.
        for st in streams(steps) {
            if !e.stream.iter().any(|x| x.id == st.order.id) {
                e.stream.push(StreamExpect {
                    id: st.order.id.clone(),
                    on: st.on.clone(),
                    completed: st.order.content.count,
                    max_ack_latency_ms: None,
                });
            }
        }
    }
}

/// `item` with the `*` or `+` that ends its unknown name `name` moved to the end
/// of the item, where a repetition goes (`SEND Only* {c}` → `SEND Only {c}*`),
/// when that makes the name one that is known.
fn repeat_at_the_end(item: &str, name: &str) -> Option<String> {
    let name = name.trim();
    let mark = name.chars().last().filter(|c| matches!(c, '*' | '+'))?;
    name[..name.len() - 1].trim_end().parse::<Atom>().ok()?;
    let at = item.find(name)? + name.len() - 1;
    let rest = format!("{}{}", &item[..at], &item[at + 1..]);
    let rest = rest.trim_end();
    if rest.ends_with(['*', '+']) {
        return None;
    }
    Some(format!("{rest}{mark}"))
}

/// One PSN of a wire expectation's list: `16777215`, `"first"`, `"first+N"`.
fn wire_psn(r: &PsnRef) -> Result<WirePsn, String> {
    match r {
        PsnRef::Absolute(p) if *p <= Psn::MASK => Ok(WirePsn::Absolute(Psn::new(*p))),
        PsnRef::Absolute(p) => Err(format!("PSN {p} is more than 24 bits")),
        PsnRef::Relative(s) => {
            let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
            let bad = || format!("`{s}` is not a PSN: say a number, \"first\" or \"first+N\"");
            let rest = t.strip_prefix("first").ok_or_else(bad)?;
            if rest.is_empty() {
                return Ok(WirePsn::First(0));
            }
            let n: u32 = rest.strip_prefix('+').ok_or_else(bad)?.parse().map_err(|_| bad())?;
            if n > Psn::MASK {
                return Err(format!("`{s}`: more than the 24-bit PSN space"));
            }
            Ok(WirePsn::First(n))
        }
    }
}
