//! The scenario's objects: QPs (one per `[[qp]]`, or `count` of them), MRs,
//! memory windows and SRQs, each looked up, typed and bounded.
//!
//! Owns: the `impl Checker` for QPs, MRs, memory windows and SRQs. Imports: the
//! checker's vocabulary (`use super::*`); nothing else.
use super::*;

impl<'a> Checker<'a> {
    pub(super) fn mws(&mut self) -> Vec<MwSpec> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for w in &self.f.mws {
            if !seen.insert((w.on.as_str(), w.name.as_str())) {
                self.err(
                    Some(w.name.span.clone()),
                    format!("a second memory window named `{}` on `{}`", *w.name, *w.on),
                    None,
                );
            }
            self.endpoint_ok(w.on.span.clone(), &w.on);
            let kind = match w.kind.value {
                1 => MwKind::Type1,
                2 => MwKind::Type2,
                n => {
                    self.err(
                        Some(w.kind.span.clone()),
                        format!("memory window type {n}"),
                        Some("1 (bound with ibv_bind_mw) or 2 (bound by a WR on a QP)".into()),
                    );
                    MwKind::Type1
                }
            };
            self.uses(
                if kind == MwKind::Type1 { Feature::MwType1 } else { Feature::MwType2 },
                w.kind.span.clone(),
            );
            out.push(MwSpec { name: w.name.value.clone(), on: w.on.value.clone(), kind });
        }
        out
    }

    pub(super) fn srqs(&mut self) -> Vec<SrqSpec> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for q in &self.f.srqs {
            if !seen.insert(q.name.as_str()) {
                self.err(
                    Some(q.name.span.clone()),
                    format!("a second SRQ named `{}`", *q.name),
                    Some("SRQ names are unique in a scenario: a QP names its SRQ".into()),
                );
            }
            self.endpoint_ok(q.on.span.clone(), &q.on);
            self.uses(Feature::Srq, q.name.span.clone());
            out.push(SrqSpec {
                name: q.name.value.clone(),
                on: q.on.value.clone(),
                max_wr: q.max_wr.unwrap_or(16),
                max_sge: q.max_sge.unwrap_or(4),
            });
        }
        out
    }

    pub(super) fn qps(&mut self) -> Vec<Qp> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for q in &self.f.qps {
            if !seen.insert(q.name.as_str()) {
                self.err(
                    Some(q.name.span.clone()),
                    format!("a second QP named `{}`", *q.name),
                    None,
                );
            }
            for e in q.between.iter() {
                self.endpoint_ok(q.between.span.clone(), e);
            }
            if q.between[0] == q.between[1] {
                self.err(
                    Some(q.between.span.clone()),
                    "a QP pair needs two endpoints",
                    Some("for two QPs on one host use two endpoints with the same `vm`".into()),
                );
            }
            let params = self.qp_params(q);
            let access = self.qp_access(q);
            let psn = self.qp_psns(q);
            if let (Some(k), false) = (&q.qkey, q.qp_type == QpType::Ud) {
                self.err(Some(k.span.clone()), "a Q_Key is for UD QPs", None);
            }
            self.qp_srq(q);
            out.push(Qp {
                name: q.name.value.clone(),
                kind: q.qp_type,
                between: q.between.value.clone(),
                connect: q.connect,
                psn,
                params,
                access,
                max_send_wr: q.max_send_wr.unwrap_or(16),
                max_recv_wr: q.max_recv_wr.unwrap_or(16),
                max_sge: q.max_sge.unwrap_or(4),
                max_inline: q.max_inline.unwrap_or(0),
                srq: q.srq.as_ref().map(|n| n.value.clone()),
            });
        }
        out
    }

    /// A QP's transport attributes, each within its field's bounds (the default
    /// in place of one that is not).
    fn qp_params(&mut self, q: &file::QpFile) -> QpParams {
        let mtu = match &q.mtu {
            Some(m) if ![256, 512, 1024, 2048, 4096].contains(&m.value) => {
                self.err(
                    Some(m.span.clone()),
                    format!("MTU {} is not an IB MTU", m.value),
                    Some("256, 512, 1024, 2048 or 4096".into()),
                );
                1024
            }
            Some(m) => m.value,
            None => 1024,
        };
        let bounded = |c: &mut Self,
                       v: &Option<Spanned<u8>>,
                       max: u8,
                       default: u8,
                       what: &str,
                       hint: &str| {
            match v {
                Some(x) if x.value > max => {
                    c.err(Some(x.span.clone()), what.to_string(), Some(hint.to_string()));
                    default
                }
                Some(x) => x.value,
                None => default,
            }
        };
        let min_rnr_timer = bounded(
            self,
            &q.min_rnr_timer,
            31,
            12,
            "the RNR timer is a 5-bit code",
            "0–31; 12 is 0.64 ms, 0 is 655 ms",
        );
        let retry_cnt = bounded(
            self,
            &q.retry_cnt,
            7,
            7,
            "retry_cnt is a 3-bit count",
            "0–7 (rnr_retry 7 means retry forever)",
        );
        let rnr_retry = bounded(
            self,
            &q.rnr_retry,
            7,
            7,
            "rnr_retry is a 3-bit count",
            "0–7 (rnr_retry 7 means retry forever)",
        );
        let timeout = bounded(
            self,
            &q.timeout,
            31,
            14,
            "the ACK timeout is a 5-bit exponent",
            "0–31: 4.096 µs × 2^timeout; 14 ≈ 67 ms",
        );
        QpParams {
            mtu,
            timeout,
            retry_cnt,
            rnr_retry,
            min_rnr_timer,
            max_rd_atomic: q.max_rd_atomic.unwrap_or(1),
            max_dest_rd_atomic: q.max_dest_rd_atomic.unwrap_or(1),
            qkey: q.qkey.as_ref().map_or(DEFAULT_QKEY, |k| k.value),
        }
    }

    /// Each end's `qp_access_flags` (the default: every remote access).
    fn qp_access(&mut self, q: &file::QpFile) -> BTreeMap<String, Access> {
        let mut access = BTreeMap::new();
        for e in q.between.iter() {
            let flags = match q.access.as_ref().map(|a| (&a.value, a.span.clone())) {
                Some((PerEndpoint::Same(l), span)) => Some((l.clone(), span)),
                Some((PerEndpoint::Each(m), span)) => m.get(e).map(|l| (l.clone(), span)),
                None => None,
            };
            let a = match flags {
                Some((l, span)) => {
                    let a = self.access(span.clone(), &l);
                    self.access_uses(a, span);
                    a
                }
                None => Access::REMOTE_ALL,
            };
            access.insert(e.clone(), a);
        }
        if let Some(Spanned { value: PerEndpoint::Each(m), span }) = &q.access {
            for k in m.keys().filter(|k| !q.between.contains(k)) {
                self.err(
                    Some(span.clone()),
                    format!("`{k}` is not an end of QP `{}`", *q.name),
                    Some(format!("its ends are {} and {}", q.between[0], q.between[1])),
                );
            }
        }
        access
    }

    /// Each end's first send PSN, where the file gives one.
    fn qp_psns(&mut self, q: &file::QpFile) -> BTreeMap<String, Psn> {
        let mut psn = BTreeMap::new();
        match q.psn.as_ref().map(|p| (&p.value, p.span.clone())) {
            Some((PerEndpoint::Same(p), span)) => {
                for e in q.between.iter() {
                    psn.insert(e.clone(), self.psn(span.clone(), *p));
                }
            }
            Some((PerEndpoint::Each(m), span)) => {
                for (k, p) in m {
                    if !q.between.contains(k) {
                        self.err(
                            Some(span.clone()),
                            format!("`{k}` is not an end of QP `{}`", *q.name),
                            Some(format!("its ends are {} and {}", q.between[0], q.between[1])),
                        );
                    }
                    psn.insert(k.clone(), self.psn(span.clone(), *p));
                }
            }
            None => {}
        }
        psn
    }

    /// The SRQ a QP takes its receives from is one of its ends'.
    fn qp_srq(&mut self, q: &file::QpFile) {
        if let Some(n) = &q.srq {
            match self.srq_file(n) {
                None => {
                    let hint = name_hint(n, self.f.srqs.iter().map(|x| x.name.as_str()));
                    self.err(Some(n.span.clone()), format!("no SRQ `{}`", n.value), hint)
                }
                Some(x) if !q.between.contains(&x.on.value) => self.err(
                    Some(n.span.clone()),
                    format!(
                        "SRQ `{}` is on `{}`, not an end of QP `{}`",
                        n.value, x.on.value, *q.name
                    ),
                    Some(format!("its ends are {} and {}", q.between[0], q.between[1])),
                ),
                Some(_) => {}
            }
        }
    }

    pub(super) fn psn(&mut self, span: Range<usize>, p: u32) -> Psn {
        if p > Psn::MASK {
            self.err(
                Some(span),
                format!("PSN {p} is more than 24 bits"),
                Some("0 to 16777215".into()),
            );
        }
        Psn::new(p)
    }

    pub(super) fn mrs(&mut self) -> Vec<Mr> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for m in &self.f.mrs {
            if !seen.insert((m.on.as_str(), m.name.as_str())) {
                self.err(
                    Some(m.name.span.clone()),
                    format!("a second MR named `{}` on `{}`", *m.name, *m.on),
                    None,
                );
            }
            self.endpoint_ok(m.on.span.clone(), &m.on);
            if m.size.value == 0 || m.size.value > MAX_MR {
                self.err(
                    Some(m.size.span.clone()),
                    format!("MR size {} out of range", m.size.value),
                    Some("1 byte to 64 MiB".into()),
                );
            }
            let access = match &m.access {
                Some(a) => {
                    let x = self.access(a.span.clone(), &a.value);
                    self.access_uses(x, a.span.clone());
                    x
                }
                None => Access::LOCAL_WRITE,
            };
            if let Some(c) = &m.init {
                match c.try_bytes(m.size.value.min(MAX_MR) as usize) {
                    Ok(b) if b.len() as u64 > m.size.value => self.err(
                        Some(c.span.clone()),
                        format!(
                            "initial content of {} bytes in an MR of {}",
                            b.len(),
                            m.size.value
                        ),
                        None,
                    ),
                    Ok(_) => {}
                    Err(e) => self.err(
                        Some(c.span.clone()),
                        e,
                        Some(
                            "bytes = \"de ad be ef\", pattern = \"ab\", text = \"…\" or u64 = 5"
                                .into(),
                        ),
                    ),
                }
            }
            out.push(Mr {
                name: m.name.value.clone(),
                on: m.on.value.clone(),
                size: m.size.value,
                access,
                init: m.init.as_ref().map(|c| c.value.clone()),
            });
        }
        out
    }
}
