//! From a scenario file as written ([`super::file`]) to a checked scenario
//! ([`super::model`]): every name looked up, every value typed and bounded, every
//! problem found reported at once, each at `file:line:col` with a hint.
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use dissector::wire::{Headers, NakKind, Opcode, Psn};

use super::diag::{serde_hint, Diagnostic, Source};
use super::file::{
    self, Content, PerEndpoint, ProbeFile, PsnRef, QpType, ScenarioFile, Sp, StepOp,
};
use super::model::*;
use super::pattern::Pattern;
use crate::protocol::stream::STREAM_MESSAGES;
use crate::protocol::READ_BACK_MAX;
use crate::verbs::{
    Access, EventType, Feature, MwKind, Placement, Selectivity, SendFlag, WcOpcode, WcStatus,
};

/// The longest message a stream may post.
const MAX_STREAM_MESSAGE: u32 = 1 << 30;
/// The largest stream ring (`ring`): its memory check keeps 5 bytes per byte.
const MAX_RING: u64 = 16 << 20;

/// The `timeout_ms` a scenario may set.
const TIMEOUT_MS: std::ops::RangeInclusive<u64> = 1_000..=3_600_000;
/// The largest MR a scenario may ask for.
const MAX_MR: u64 = 64 << 20;

/// Reads and checks a scenario file.
pub(crate) fn load(path: &Path) -> Result<Scenario, Vec<Diagnostic>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![Diagnostic {
            file: path.to_path_buf(),
            line: 1,
            col: 1,
            message: format!("cannot read the scenario: {e}"),
            excerpt: None,
            hint: None,
        }]
    })?;
    parse_str(path, &text)
}

/// Parses and checks scenario text; `path` names it in the diagnostics.
pub(crate) fn parse_str(path: &Path, text: &str) -> Result<Scenario, Vec<Diagnostic>> {
    let src = Source { file: path, text };
    if let Err(e) = text.parse::<toml::Table>() {
        let msg = e.message().trim().to_string();
        return Err(vec![src.diag(
            e.span(),
            format!("TOML syntax: {msg}"),
            Some("see the TOML syntax at toml.io; strings need quotes".into()),
        )]);
    }
    let mut f: ScenarioFile = toml::from_str(text).map_err(|e| {
        let msg = e.message().trim().to_string();
        let hint =
            serde_hint(&msg).or_else(|| Some("`roce schema` prints every key and its type".into()));
        vec![src.diag(e.span(), msg, hint)]
    })?;
    let mut out = Vec::new();
    let groups = expand_groups(&mut f, &src, &mut out);
    let mut c = Checker { src: &src, out, f: &f, bound: BTreeMap::new(), uses: Vec::new(), groups };
    let sc = c.scenario();
    if c.out.is_empty() {
        Ok(sc)
    } else {
        Err(c.out)
    }
}

/// A probe's payload: `payload` (a pattern repeated to `len`), or `len` zero bytes.
pub(crate) fn probe_payload(
    payload: Option<&Content>,
    len: Option<u32>,
) -> Result<Vec<u8>, String> {
    let len = len.map(|l| l as usize);
    match (payload, len) {
        (Some(c @ Content::Pattern(_)), None) => c.try_bytes(0).and_then(|b| {
            if b.is_empty() {
                Err("an empty pattern".into())
            } else {
                Ok(b)
            }
        }),
        (Some(c), Some(l)) => {
            let mut b = c.try_bytes(l)?;
            if b.len() > l {
                return Err(format!("a payload of {} bytes, but `len` is {l}", b.len()));
            }
            b.resize(l, 0);
            Ok(b)
        }
        (Some(c), None) => c.try_bytes(0),
        (None, l) => Ok(vec![0; l.unwrap_or(0)]),
    }
}

/// `"next"`, `"next+3"`, `"next-1"` or an absolute 24-bit PSN.
pub(crate) fn psn_at(r: &PsnRef) -> Result<PsnAt, String> {
    match r {
        PsnRef::Absolute(p) if *p <= Psn::MASK => Ok(PsnAt::Absolute(Psn::new(*p))),
        PsnRef::Absolute(p) => Err(format!("PSN {p} is more than 24 bits")),
        PsnRef::Relative(s) => {
            let bad =
                || format!("`{s}` is not a PSN: say \"next\", \"next+N\", \"next-N\" or a number");
            let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
            let rest = t.strip_prefix("next").ok_or_else(bad)?;
            if rest.is_empty() {
                return Ok(PsnAt::Next(0));
            }
            let (sign, n) = match rest.split_at(1) {
                ("+", n) => (1, n),
                ("-", n) => (-1, n),
                _ => return Err(bad()),
            };
            let n: i32 = n.parse().map_err(|_| format!("`{s}`: `{n}` is not a number"))?;
            if n > 0x7f_ffff {
                return Err(format!("`{s}`: more than half the 24-bit PSN space away"));
            }
            Ok(PsnAt::Next(sign * n))
        }
    }
}

/// A stream's QPs, as its receives need them: the peer they go to, how many,
/// and the fewest receives one of them can hold.
struct StreamQps<'a> {
    peer: &'a str,
    count: usize,
    recv_wr: u32,
}

struct Checker<'a> {
    src: &'a Source<'a>,
    out: Vec<Diagnostic>,
    f: &'a ScenarioFile,
    /// Where each memory window (by endpoint and name) was last bound, in step
    /// order: its MR, offset and length.
    bound: BTreeMap<(String, String), (String, u64, u64)>,
    /// Features the scenario uses, and where: each must be in `requires`.
    uses: Vec<(Feature, Range<usize>)>,
    /// The QPs written with a `count`, by name: how many.
    groups: Groups,
}

/// The most QP pairs one `[[qp]]` with a `count` makes.
const MAX_QP_COUNT: u32 = 256;

/// QPs written with a `count`, by name: how many.
type Groups = BTreeMap<String, u32>;

/// `[[qp]] count = N` written out: N QPs `q[0]` … `q[N-1]`; a wire expectation or
/// a fault naming `q` becomes one per QP, and a stream on `q` takes them all.
fn expand_groups(f: &mut ScenarioFile, src: &Source, out: &mut Vec<Diagnostic>) -> Groups {
    let mut groups = Groups::new();
    let mut qps = Vec::new();
    for q in std::mem::take(&mut f.qps) {
        match q.count.clone() {
            None => qps.push(q),
            Some(c) if !(1..=MAX_QP_COUNT).contains(&c.value) => {
                out.push(src.diag(
                    Some(c.span),
                    format!("a count of {}: give 1 to {MAX_QP_COUNT}", c.value),
                    None,
                ));
                qps.push(q);
            }
            Some(c) => {
                groups.insert(q.name.value.clone(), c.value);
                for i in 0..c.value {
                    let mut one = q.clone();
                    one.name.value = format!("{}[{i}]", *q.name);
                    one.count = None;
                    qps.push(one);
                }
            }
        }
    }
    f.qps = qps;
    let members = |name: &str| {
        groups.get(name).map(|n| (0..*n).map(|i| format!("{name}[{i}]")).collect::<Vec<String>>())
    };
    let mut wire = Vec::new();
    for w in std::mem::take(&mut f.expect.wire) {
        match members(&w.qp) {
            Some(m) => wire.extend(m.into_iter().map(|n| file::WireFile {
                qp: Sp { value: n, span: w.qp.span.clone() },
                ..w.clone()
            })),
            None => wire.push(w),
        }
    }
    f.expect.wire = wire;
    let mut faults = Vec::new();
    for x in std::mem::take(&mut f.faults) {
        match x.qp.as_ref().and_then(|q| members(q).map(|m| (m, q.span.clone()))) {
            Some((m, span)) => faults.extend(m.into_iter().map(|n| file::FaultFile {
                qp: Some(Sp { value: n, span: span.clone() }),
                ..x.clone()
            })),
            None => faults.push(x),
        }
    }
    f.faults = faults;
    for s in &mut f.steps {
        if let Ok(StepOp::Stream { qp, qps, .. }) = &mut s.op {
            if let Some(m) = qp.as_deref().and_then(members) {
                *qp = None;
                *qps = m;
            } else {
                *qps = qps
                    .iter()
                    .flat_map(|n| members(n).unwrap_or_else(|| vec![n.clone()]))
                    .collect();
            }
        }
    }
    groups
}

/// `"0..10"`, `"5.."`, `"..3"`, `"2"`: a count between two bounds, both included.
fn count_range(text: &str) -> Result<(u64, u64), String> {
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

/// The stream steps among `steps`.
fn streams(steps: &[Step]) -> impl Iterator<Item = &StreamStep> + Clone {
    steps.iter().filter_map(|s| if let Step::Stream(st) = s { Some(st) } else { None })
}

/// The stream step named `id`.
fn stream_step<'s>(steps: &'s [Step], id: &str) -> Option<&'s StreamStep> {
    streams(steps).find(|st| st.id == id)
}

fn name_hint<'b>(word: &str, names: impl IntoIterator<Item = &'b str> + Clone) -> Option<String> {
    match dissector::text::did_you_mean(word, names.clone()) {
        Some(m) => Some(format!("did you mean `{m}`?")),
        None => {
            let all: Vec<&str> = names.into_iter().collect();
            (!all.is_empty() && all.len() <= 12).then(|| format!("known: {}", all.join(", ")))
        }
    }
}

/// The message of a name the vocabulary refused, and its suggestion as the hint.
fn split_suggestion(message: &str) -> (String, Option<String>) {
    match message.split_once(" (did you mean ") {
        Some((m, s)) => (m.to_string(), Some(format!("did you mean {}", s.trim_end_matches(')')))),
        None => (message.to_string(), None),
    }
}

impl<'a> Checker<'a> {
    fn err(
        &mut self,
        span: Option<Range<usize>>,
        message: impl Into<String>,
        hint: Option<String>,
    ) {
        // One place in the file can be checked more than once (a QP's `access` for
        // each of its ends, a wire expectation for each QP of a group): it is one
        // problem, said once.
        let d = self.src.diag(span, message, hint);
        if !self.out.contains(&d) {
            self.out.push(d);
        }
    }

    fn endpoint_ok(&mut self, span: Range<usize>, name: &str) -> bool {
        if self.f.endpoints.contains_key(name) {
            return true;
        }
        let hint = name_hint(name, self.f.endpoints.keys().map(String::as_str));
        self.err(Some(span), format!("no endpoint `{name}`"), hint);
        false
    }

    fn qp_file(&self, name: &str) -> Option<&'a file::QpFile> {
        self.f.qps.iter().find(|q| *q.name == name)
    }

    fn mr_file(&self, on: &str, name: &str) -> Option<&'a file::MrFile> {
        self.f.mrs.iter().find(|m| *m.on == on && *m.name == name)
    }

    /// The little-endian word at `offset` of MR `name` on `on` as it starts (its
    /// `init`, zero elsewhere): what an atomic stream's word holds before it.
    fn initial_word(&self, on: &str, name: &str, offset: u64) -> u64 {
        let Some(init) = self.mr_file(on, name).and_then(|m| m.init.as_ref()) else { return 0 };
        let end = offset.saturating_add(8) as usize;
        let mut bytes = init.try_bytes(end).unwrap_or_default();
        bytes.resize(bytes.len().max(end), 0);
        bytes
            .get(offset as usize..end)
            .and_then(|w| w.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    }

    fn mr_names_on<'b>(&self, on: &'b str) -> impl Iterator<Item = &'a str> + Clone + 'b
    where
        'a: 'b,
    {
        self.f.mrs.iter().filter(move |m| *m.on == on).map(|m| m.name.as_str())
    }

    fn access(&mut self, span: Range<usize>, flags: &[String]) -> Access {
        let mut a = Access(0);
        for f in flags {
            match Access::flag(f) {
                Ok(x) => a = a | x,
                Err(e) => self.err(
                    Some(span.clone()),
                    format!("unknown access flag `{f}`"),
                    e.suggestion.map(|s| format!("did you mean `{s}`?")),
                ),
            }
        }
        a
    }

    fn scenario(&mut self) -> Scenario {
        let f = self.f;
        if f.endpoints.is_empty() {
            self.err(None, "no endpoints", Some("add `[endpoints.a]` and `[endpoints.b]`".into()));
        }
        let timeout = match &f.timeout_ms {
            Some(t) if !TIMEOUT_MS.contains(&t.value) => {
                let hint = "the deadline of the whole scenario, setup included: lab VMs under TCG take seconds to set up";
                self.err(
                    Some(t.span.clone()),
                    format!(
                        "a timeout of {} ms: give {} to {} (1 s to 1 hour)",
                        t.value,
                        TIMEOUT_MS.start(),
                        TIMEOUT_MS.end()
                    ),
                    Some(hint.into()),
                );
                DEFAULT_TIMEOUT_MS
            }
            Some(t) => t.value,
            None => DEFAULT_TIMEOUT_MS,
        };
        let endpoints = f
            .endpoints
            .iter()
            .map(|(n, e)| {
                (
                    n.clone(),
                    Endpoint {
                        vm: e.vm.clone(),
                        device: e.device.clone(),
                        port: e.port,
                        gid_index: e.gid_index,
                    },
                )
            })
            .collect();
        let mws = self.mws();
        let srqs = self.srqs();
        let qps = self.qps();
        let mrs = self.mrs();
        let steps = self.steps(timeout);
        let faults = self.faults();
        let expect = self.expectations(&mrs, &steps);
        let requires = self.requires();
        Scenario {
            name: f.name.clone(),
            timeout: Duration::from_millis(timeout),
            endpoints,
            qps,
            mrs,
            steps,
            expect,
            faults,
            requires,
            mws,
            srqs,
        }
    }

    /// `requires`, read; and every feature the scenario uses must be in it (a
    /// device without it must skip the scenario, not fail it).
    fn requires(&mut self) -> Vec<Feature> {
        let mut out: Vec<Feature> = Vec::new();
        for r in &self.f.requires {
            match r.parse::<Feature>() {
                Ok(x) if !out.contains(&x) => out.push(x),
                Ok(_) => {}
                Err(e) => {
                    let hint = e.suggestion.map(|m| format!("did you mean `{m}`?")).or_else(|| {
                        Some(format!("known: {}", Feature::ALL.map(|f| f.name()).join(", ")))
                    });
                    self.err(Some(r.span.clone()), format!("unknown feature `{}`", r.value), hint)
                }
            }
        }
        let mut said = BTreeSet::new();
        for (x, span) in std::mem::take(&mut self.uses) {
            if !out.contains(&x) && said.insert(x) {
                let hint = format!("add `requires = [\"{x}\"]` at the top: a device without {} then skips the scenario instead of failing it", x.what());
                self.err(
                    Some(span),
                    format!("this needs `{x}` ({}), which `requires` does not name", x.what()),
                    Some(hint),
                );
            }
        }
        out.sort();
        out
    }

    fn uses(&mut self, f: Feature, span: Range<usize>) {
        self.uses.push((f, span));
    }

    /// The features an access set needs (the flush flags: a kernel without FLUSH
    /// refuses them in `ibv_reg_mr` and `ibv_modify_qp`).
    fn access_uses(&mut self, a: Access, span: Range<usize>) {
        if a.0 & Access::FLUSH_GLOBAL.0 != 0 {
            self.uses(Feature::Flush, span.clone());
        }
        if a.0 & Access::FLUSH_PERSISTENT.0 != 0 {
            self.uses(Feature::FlushPersistent, span);
        }
    }

    fn mws(&mut self) -> Vec<MwSpec> {
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

    fn srqs(&mut self) -> Vec<SrqSpec> {
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

    fn mw_file(&self, on: &str, name: &str) -> Option<&'a file::MwFile> {
        self.f.mws.iter().find(|w| *w.on == on && *w.name == name)
    }

    fn srq_file(&self, name: &str) -> Option<&'a file::SrqFile> {
        self.f.srqs.iter().find(|q| *q.name == name)
    }

    fn peer_of(&self, on: &str, qp: &str) -> Option<String> {
        let q = self.qp_file(qp)?;
        Some(if q.between[0] == on { q.between[1].clone() } else { q.between[0].clone() })
    }

    fn qps(&mut self) -> Vec<Qp> {
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
            let bounded =
                |c: &mut Self, v: &Option<Sp<u8>>, max: u8, default: u8, what: &str, hint: &str| {
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
            if let Some(Sp { value: PerEndpoint::Each(m), span }) = &q.access {
                for k in m.keys().filter(|k| !q.between.contains(k)) {
                    self.err(
                        Some(span.clone()),
                        format!("`{k}` is not an end of QP `{}`", *q.name),
                        Some(format!("its ends are {} and {}", q.between[0], q.between[1])),
                    );
                }
            }
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
            if let (Some(k), false) = (&q.qkey, q.qp_type == QpType::Ud) {
                self.err(Some(k.span.clone()), "a Q_Key is for UD QPs", None);
            }
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
            out.push(Qp {
                name: q.name.value.clone(),
                kind: q.qp_type,
                between: q.between.value.clone(),
                connect: q.connect,
                mtu,
                psn,
                timeout,
                retry_cnt,
                rnr_retry,
                min_rnr_timer,
                max_rd_atomic: q.max_rd_atomic.unwrap_or(1),
                max_dest_rd_atomic: q.max_dest_rd_atomic.unwrap_or(1),
                access,
                qkey: q.qkey.as_ref().map_or(DEFAULT_QKEY, |k| k.value),
                max_send_wr: q.max_send_wr.unwrap_or(16),
                max_recv_wr: q.max_recv_wr.unwrap_or(16),
                max_sge: q.max_sge.unwrap_or(4),
                max_inline: q.max_inline.unwrap_or(0),
                srq: q.srq.as_ref().map(|n| n.value.clone()),
            });
        }
        out
    }

    fn psn(&mut self, span: Range<usize>, p: u32) -> Psn {
        if p > Psn::MASK {
            self.err(
                Some(span),
                format!("PSN {p} is more than 24 bits"),
                Some("0 to 16777215".into()),
            );
        }
        Psn::new(p)
    }

    fn mrs(&mut self) -> Vec<Mr> {
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

    /// Where a serde message about a step points: the key it names, the `op` for
    /// an unknown op, else the step.
    fn step_error(&mut self, s: &file::StepFile, message: &str) {
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

    fn steps(&mut self, timeout_ms: u64) -> Vec<Step> {
        let mut out = Vec::new();
        let mut probe_ids: Vec<String> = Vec::new();
        let mut stream_ids: Vec<String> = Vec::new();
        let mut waited = 0u64;
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
                StepOp::Sleep { ms } => Some(Step::Sleep { ms: *ms }),
                StepOp::WaitCompletions { on, count, within_ms } => {
                    self.endpoint_ok(s.at("on"), on);
                    Some(Step::WaitCompletions {
                        on: on.clone(),
                        count: *count,
                        within_ms: within_ms.unwrap_or(2000),
                    })
                }
                StepOp::PostRecv { on, qp, wr_id, sge } => {
                    self.qp_step(i, s, on, qp).map(|q| Step::PostRecv {
                        on: on.clone(),
                        qp: qp.clone(),
                        wr_id: *wr_id,
                        sge: self.sges(s, on, sge, false, q.qp_type),
                    })
                }
                StepOp::Send { on, qp, wr_id, sge, flags, to }
                | StepOp::SendImm { on, qp, wr_id, sge, flags, to, .. } => {
                    let verb = match op {
                        StepOp::SendImm { imm_data, .. } => Verb::SendImm { imm: *imm_data },
                        _ => Verb::Send,
                    };
                    if let Some(t) = to {
                        self.endpoint_ok(s.at("to"), t);
                    }
                    self.post(i, s, on, qp, *wr_id, sge, flags, verb)
                }
                StepOp::Stream { .. } => self.stream(s, op, &mut stream_ids),
                StepOp::Write { on, qp, wr_id, sge, flags, remote } => {
                    let remote = self.remote(s, on, qp, remote);
                    self.post(i, s, on, qp, *wr_id, sge, flags, Verb::Write { remote })
                }
                StepOp::WriteImm { on, qp, wr_id, sge, flags, remote, imm_data } => {
                    let remote = self.remote(s, on, qp, remote);
                    self.post(
                        i,
                        s,
                        on,
                        qp,
                        *wr_id,
                        sge,
                        flags,
                        Verb::WriteImm { remote, imm: *imm_data },
                    )
                }
                StepOp::Read { on, qp, wr_id, sge, flags, remote } => {
                    let remote = self.remote(s, on, qp, remote);
                    self.post(i, s, on, qp, *wr_id, sge, flags, Verb::Read { remote })
                }
                StepOp::CmpSwap { on, qp, wr_id, sge, flags, remote, compare, swap } => {
                    let remote = self.remote(s, on, qp, remote);
                    self.post(
                        i,
                        s,
                        on,
                        qp,
                        *wr_id,
                        sge,
                        flags,
                        Verb::CmpSwap { remote, compare: *compare, swap: *swap },
                    )
                }
                StepOp::FetchAdd { on, qp, wr_id, sge, flags, remote, add } => {
                    let remote = self.remote(s, on, qp, remote);
                    self.post(
                        i,
                        s,
                        on,
                        qp,
                        *wr_id,
                        sge,
                        flags,
                        Verb::FetchAdd { remote, add: *add },
                    )
                }
                StepOp::AtomicWrite { on, qp, wr_id, flags, remote, value } => {
                    self.uses(Feature::AtomicWrite, s.at("op"));
                    let value = match value.try_bytes(8) {
                        Ok(b) => match <[u8; 8]>::try_from(b.as_slice()) {
                            Ok(v) => v,
                            Err(_) => {
                                self.err(Some(s.at("value")), format!("an ATOMIC WRITE carries 8 bytes, not {}", b.len()), Some("value = { u64 = 7 } or { bytes = \"01 02 03 04 05 06 07 08\" }".into()));
                                [0; 8]
                            }
                        },
                        Err(e) => {
                            self.err(Some(s.at("value")), e, None);
                            [0; 8]
                        }
                    };
                    let remote = self.remote(s, on, qp, remote);
                    self.post(i, s, on, qp, *wr_id, &[], flags, Verb::AtomicWrite { remote, value })
                }
                StepOp::Flush { on, qp, wr_id, flags, remote, len, placement, level } => {
                    let placement = match placement.as_deref().unwrap_or("global") {
                        "global" => Placement::Global,
                        "persistent" => Placement::Persistent,
                        other => {
                            self.err(
                                Some(s.at("placement")),
                                format!("unknown placement type `{other}`"),
                                Some(
                                    "`global` (global visibility) or `persistent` (persistence)"
                                        .into(),
                                ),
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
                        if placement == Placement::Global {
                            Feature::Flush
                        } else {
                            Feature::FlushPersistent
                        },
                        s.at("op"),
                    );
                    let remote = self.remote(s, on, qp, remote);
                    let len = len.unwrap_or_else(|| {
                        self.remote_size(on, qp, &remote).saturating_sub(remote.offset)
                    });
                    self.post(
                        i,
                        s,
                        on,
                        qp,
                        *wr_id,
                        &[],
                        flags,
                        Verb::Flush { remote, len, placement, level },
                    )
                }
                StepOp::BindMw { on, qp, wr_id, flags, mw, mr, offset, len, access } => {
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
                            self.err(
                                Some(s.at("mw")),
                                format!("no memory window `{mw}` on `{on}`"),
                                hint,
                            );
                            None
                        }
                        (_, None) => {
                            let hint = name_hint(mr, self.mr_names_on(on));
                            self.err(Some(s.at("mr")), format!("no MR `{mr}` on `{on}`"), hint);
                            None
                        }
                        (Some(_), Some(m)) => Some(m.size.value),
                    };
                    let len = len.unwrap_or_else(|| size.unwrap_or(0).saturating_sub(*offset));
                    if let Some(size) = size {
                        if offset.saturating_add(len) > size {
                            self.err(
                                Some(s.at("len")),
                                format!(
                                    "{offset}+{len} runs past the end of MR `{mr}` ({size} bytes)"
                                ),
                                None,
                            );
                        }
                    }
                    self.bound.insert((on.clone(), mw.clone()), (mr.clone(), *offset, len));
                    self.post(
                        i,
                        s,
                        on,
                        qp,
                        *wr_id,
                        &[],
                        flags,
                        Verb::BindMw {
                            mw: mw.clone(),
                            mr: mr.clone(),
                            offset: *offset,
                            len,
                            access,
                        },
                    )
                }
                StepOp::SendInv { on, qp, wr_id, sge, flags, invalidate } => {
                    let inv = match (&invalidate.mw, invalidate.rkey) {
                        (Some(w), None) => {
                            let peer = self.peer_of(on, qp).unwrap_or_default();
                            if self.qp_file(qp).is_some() && self.mw_file(&peer, w).is_none() {
                                let hint = name_hint(
                                    w,
                                    self.f
                                        .mws
                                        .iter()
                                        .filter(|x| *x.on == peer)
                                        .map(|x| x.name.as_str()),
                                );
                                self.err(Some(s.at("invalidate")), format!("no memory window `{w}` on `{peer}`, the other end of `{qp}`"), hint);
                            }
                            Invalidate::Mw(w.clone())
                        }
                        (None, Some(k)) => Invalidate::Rkey(k),
                        _ => {
                            self.err(Some(s.at("invalidate")), "say what to invalidate: `{ mw = \"…\" }` (a window of the peer) or `{ rkey = … }`, one of them", None);
                            Invalidate::Rkey(0)
                        }
                    };
                    self.post(i, s, on, qp, *wr_id, sge, flags, Verb::SendInv { invalidate: inv })
                }
                StepOp::LocalInv { on, qp, wr_id, flags, mw } => {
                    if self.endpoint_ok(s.at("on"), on) && self.mw_file(on, mw).is_none() {
                        let hint = name_hint(
                            mw,
                            self.f.mws.iter().filter(|w| *w.on == *on).map(|w| w.name.as_str()),
                        );
                        self.err(
                            Some(s.at("mw")),
                            format!("no memory window `{mw}` on `{on}`"),
                            hint,
                        );
                    }
                    self.post(i, s, on, qp, *wr_id, &[], flags, Verb::LocalInv { mw: mw.clone() })
                }
                StepOp::PostSrqRecv { on, srq, wr_id, sge } => {
                    self.srq_step(s, on, srq).then(|| Step::PostSrqRecv {
                        on: on.clone(),
                        srq: srq.clone(),
                        wr_id: *wr_id,
                        sge: self.sges(s, on, sge, false, QpType::Rc),
                    })
                }
                StepOp::ArmSrq { on, srq, limit } => self
                    .srq_step(s, on, srq)
                    .then(|| Step::ArmSrq { on: on.clone(), srq: srq.clone(), limit: *limit }),
                StepOp::Probe { on, qp, probe } => {
                    let q = self.qp_step(i, s, on, qp);
                    if probe_ids.contains(&probe.id) {
                        self.err(
                            Some(s.at("probe")),
                            format!("a second probe named `{}`", probe.id),
                            None,
                        );
                    }
                    probe_ids.push(probe.id.clone());
                    let settle = probe.settle_ms.unwrap_or(DEFAULT_SETTLE_MS);
                    self.check_settle(s, settle, waited, timeout_ms);
                    waited += settle.min(MAX_SETTLE_MS);
                    q.and_then(|q| self.probe(s, probe, q, on)).map(|p| Step::Probe {
                        on: on.clone(),
                        qp: qp.clone(),
                        probe: p,
                    })
                }
            };
            out.extend(step);
        }
        out
    }

    /// A stream step: its QPs (one peer), verb, sizes and regions, every bound.
    fn stream(&mut self, s: &file::StepFile, op: &StepOp, ids: &mut Vec<String>) -> Option<Step> {
        let StepOp::Stream {
            id,
            on,
            qp,
            qps,
            verb,
            count,
            size,
            seed,
            window,
            signal_every,
            local,
            remote,
            receive,
            add,
            cmp_swap_every,
            within_ms,
            ring,
            spread,
        } = op
        else {
            return None;
        };
        if ids.contains(id) {
            self.err(Some(s.at("id")), format!("a second stream named `{id}`"), None);
        }
        ids.push(id.clone());
        let names: Vec<String> = match (qp, qps.is_empty()) {
            (Some(q), true) => vec![q.clone()],
            (None, false) => qps.clone(),
            _ => {
                self.err(Some(s.span.clone()), "say which QPs carry the stream: `qp = \"…\"`, or `qps = [\"…\", …]` (round robin), one of them", None);
                return None;
            }
        };
        let mut peer: Option<String> = None;
        let mut send_wr = 0u64;
        let mut recv_wr = u32::MAX;
        for n in &names {
            let key = if qp.is_some() { "qp" } else { "qps" };
            let q = self.qp_step(0, s, on, n)?;
            if q.qp_type == QpType::Ud
                || (q.qp_type == QpType::Uc && verb != "write" && verb != "send")
            {
                let t = if q.qp_type == QpType::Ud { "UD" } else { "UC" };
                self.err(Some(s.at(key)), format!("a {verb} stream on {t} QP `{n}`: streams of WRITEs and SENDs go on RC or UC QPs, READs and atomics on RC"), None);
            }
            recv_wr = recv_wr.min(q.max_recv_wr.unwrap_or(16));
            let p = if q.between[0] == *on { q.between[1].clone() } else { q.between[0].clone() };
            if peer.as_ref().is_some_and(|x| *x != p) {
                self.err(Some(s.at(key)), format!("QP `{n}` goes to `{p}`, the stream's other QPs to `{}`: one stream, one peer", peer.clone().unwrap_or_default()), None);
            }
            peer.get_or_insert(p);
            send_wr += u64::from(q.max_send_wr.unwrap_or(16));
        }
        let peer = peer?;
        // The word the atomics work on holds the peer MR's initial content.
        let from = remote
            .as_ref()
            .and_then(|r| Some(self.initial_word(&peer, r.mr.as_deref()?, r.offset)))
            .unwrap_or(0);
        let atomic = |add: Option<u64>, cmp_swap_every| StreamVerb::Atomic {
            add: add.unwrap_or(1),
            cmp_swap_every,
            from,
        };
        let verb = match (verb.as_str(), add, cmp_swap_every) {
            ("write", None, None) => StreamVerb::Write,
            ("read", None, None) => StreamVerb::Read,
            ("send", None, None) => StreamVerb::Send,
            ("write_imm", None, None) => StreamVerb::WriteImm,
            ("fetch_add", a, None) => atomic(*a, 0),
            ("atomics", a, k) => atomic(*a, k.unwrap_or(2)),
            ("write" | "read" | "send" | "write_imm" | "fetch_add", _, Some(_)) => {
                self.err(
                    Some(s.at("cmp_swap_every")),
                    "`cmp_swap_every` is for an `atomics` stream",
                    Some("verb = \"atomics\" mixes CmpSwap into the FetchAdds".into()),
                );
                return None;
            }
            ("write" | "read" | "send" | "write_imm", Some(_), _) => {
                self.err(Some(s.at("add")), "`add` is for a `fetch_add` or `atomics` stream", None);
                return None;
            }
            (other, _, _) => {
                let hint = name_hint(
                    other,
                    ["write", "read", "fetch_add", "atomics", "send", "write_imm"],
                );
                self.err(Some(s.at("verb")), format!("a stream of `{other}`: streams post `write`, `read`, `fetch_add`, `atomics`, `send` or `write_imm`"), hint);
                return None;
            }
        };
        if let StreamVerb::Atomic { cmp_swap_every: k, .. } = verb {
            if k > 0 && names.len() > 1 {
                let hint = "a CmpSwap compares with what the word holds once every atomic before it ran, known only when they run in order on one QP; over several QPs, use `fetch_add`";
                self.err(
                    Some(s.at("qps")),
                    format!("an `atomics` stream with CmpSwap over {} QPs", names.len()),
                    Some(hint.into()),
                );
            }
        }
        if !(1..=STREAM_MESSAGES).contains(count) {
            self.err(
                Some(s.at("count")),
                format!("a stream of {count} messages: give 1 to {STREAM_MESSAGES}"),
                None,
            );
            return None;
        }
        let sizes = match (size, verb) {
            (None, StreamVerb::Atomic { .. })
            | (Some(file::StreamSize::Fixed(8)), StreamVerb::Atomic { .. }) => Sizes::Fixed(8),
            (_, StreamVerb::Atomic { .. }) => {
                self.err(
                    Some(s.at("size")),
                    format!("an atomic moves 8 bytes: a `{}` stream has no `size`", verb.name()),
                    None,
                );
                return None;
            }
            (None, _) => Sizes::Fixed(64),
            (Some(file::StreamSize::Fixed(n)), _) if (1..=MAX_STREAM_MESSAGE).contains(n) => {
                Sizes::Fixed(*n)
            }
            (Some(file::StreamSize::Range { min, max }), _)
                if *min >= 1 && min <= max && *max <= MAX_STREAM_MESSAGE =>
            {
                Sizes::Uniform { min: *min, max: *max }
            }
            (Some(_), _) => {
                self.err(
                    Some(s.at("size")),
                    format!(
                        "message sizes go from 1 to {MAX_STREAM_MESSAGE} bytes, and `min` ≤ `max`"
                    ),
                    Some("size = 4096, or size = { min = 1, max = 4096 }".into()),
                );
                return None;
            }
        };
        let window = window.unwrap_or(16);
        let mut content = StreamContent {
            seed: seed.unwrap_or(1),
            count: *count,
            sizes,
            ring: None,
            spread: Spread::RoundRobin,
        };
        content.ring =
            ring.filter(|&r| self.stream_ring(s, verb, r, window, u64::from(content.max_len())));
        content.spread = match spread.as_deref() {
            None | Some("round_robin") => Spread::RoundRobin,
            Some("random") => Spread::Random,
            Some(other) => {
                let hint = name_hint(other, ["round_robin", "random"]);
                self.err(
                    Some(s.at("spread")),
                    format!(
                        "a spread of `{other}`: messages go `round_robin` or `random` over the QPs"
                    ),
                    hint,
                );
                Spread::RoundRobin
            }
        };
        if window == 0 || u64::from(window) > send_wr {
            let hint = format!("its QPs' send queues hold {send_wr} work requests in all (`max_send_wr`, default 16 each)");
            self.err(
                Some(s.at("window")),
                format!("a window of {window}: give 1 to {send_wr}"),
                Some(hint),
            );
        }
        let signal_every = signal_every.unwrap_or(1);
        if signal_every == 0 || signal_every > window {
            self.err(Some(s.at("signal_every")), format!("signalling every {signal_every}-th message: give 1 to the window ({window})"), Some("an unsignalled message holds its send queue slot until a signalled one after it completes".into()));
        }
        let within_ms = within_ms.unwrap_or(60_000);
        if !TIMEOUT_MS.contains(&within_ms) {
            self.err(
                Some(s.at("within_ms")),
                format!("{within_ms} ms: give {} to {}", TIMEOUT_MS.start(), TIMEOUT_MS.end()),
                None,
            );
        }
        let (local_span, remote_span) = match verb {
            StreamVerb::Atomic { .. } => (8 * count, 8),
            _ => (content.span(), content.span()),
        };
        match self.mr_file(on, &local.mr) {
            None => {
                let hint = name_hint(&local.mr, self.mr_names_on(on));
                self.err(Some(s.at("local")), format!("no MR `{}` on `{on}`", local.mr), hint);
            }
            Some(m) if local.offset.saturating_add(local_span) > m.size.value => self.err(
                Some(s.at("local")),
                format!(
                    "the stream needs {local_span} bytes from offset {} of MR `{}`, which has {}",
                    local.offset, local.mr, m.size.value
                ),
                None,
            ),
            Some(_) => {}
        }
        let receive = match (verb, receive, remote) {
            // A SEND goes to the receives alone; a WRITE with immediate to the
            // peer's MR and a receive.
            (StreamVerb::Send, Some(r), None) | (StreamVerb::WriteImm, Some(r), Some(_)) => {
                let qps = StreamQps { peer: &peer, count: names.len(), recv_wr };
                Some(self.stream_receives(s, verb, qps, &content, r))
            }
            (StreamVerb::WriteImm, _, _) => {
                self.err(Some(s.at("verb")), "a `write_imm` stream writes the peer's MR and consumes its receives: give `remote = { mr = \"…\" }` and `receive = { depth = … }`", None);
                return None;
            }
            (StreamVerb::Send, _, _) => {
                self.err(Some(s.at("verb")), "a `send` stream goes to the peer's receives: give `receive = { mr = \"…\" }`, and no `remote`", None);
                return None;
            }
            (_, Some(_), _) => {
                self.err(
                    Some(s.at("receive")),
                    "`receive` is for a `send` or `write_imm` stream",
                    None,
                );
                return None;
            }
            (_, None, None) => {
                self.err(
                    Some(s.at("verb")),
                    format!(
                        "a {} stream addresses the peer's memory: give `remote = {{ mr = \"…\" }}`",
                        verb.name()
                    ),
                    None,
                );
                return None;
            }
            (_, None, Some(_)) => None,
        };
        let remote = remote.as_ref().map(|r| self.remote(s, on, &names[0], r));
        if let Some(remote) = &remote {
            self.stream_remote(s, &peer, verb, remote, remote_span);
        }
        Some(Step::Stream(StreamStep {
            id: id.clone(),
            on: on.clone(),
            peer,
            qps: names,
            verb,
            content,
            window,
            signal_every,
            local_mr: local.mr.clone(),
            local_offset: local.offset,
            remote,
            receive,
            within_ms,
        }))
    }

    /// A stream's ring: for the verbs whose memory can go round one, large enough
    /// that no message in flight is written over, small enough to check.
    fn stream_ring(
        &mut self,
        s: &file::StepFile,
        verb: StreamVerb,
        ring: u64,
        window: u32,
        longest: u64,
    ) -> bool {
        if !matches!(verb, StreamVerb::Write | StreamVerb::Send | StreamVerb::WriteImm) {
            let why = match verb {
                StreamVerb::Read => "a READ stream reads the peer's MR, filled once before it starts, so its messages cannot share the bytes",
                _ => "an atomic stream's old values each have their own 8 bytes",
            };
            self.err(
                Some(s.at("ring")),
                format!("`ring` is for `write`, `write_imm` and `send` streams: {why}"),
                None,
            );
            return false;
        }
        // A message that would run past the end starts again at 0: up to one
        // message's length is lost at the end of each lap.
        let need = (u64::from(window) + 2) * longest;
        if ring < need {
            self.err(
                Some(s.at("ring")),
                format!("a ring of {ring} bytes: with a window of {window}, messages of up to {longest} bytes need at least {need} ((window + 2) × the longest), or a message in flight is written over"),
                None,
            );
            return false;
        }
        if ring > MAX_RING {
            self.err(Some(s.at("ring")), format!("a ring of {ring} bytes: at most {MAX_RING} (its check holds the owner of each byte)"), Some("leave out `ring` to lay the messages back to back".into()));
            return false;
        }
        true
    }

    /// The peer's receives of a SEND stream: a ring of `depth` slots of the
    /// longest message per QP in its MR. A `write_imm` stream's hold no bytes.
    fn stream_receives(
        &mut self,
        s: &file::StepFile,
        verb: StreamVerb,
        qps: StreamQps<'_>,
        content: &StreamContent,
        r: &file::StreamReceive,
    ) -> ReceiveSpec {
        let StreamQps { peer, count: qps, recv_wr } = qps;
        let depth = r.depth.unwrap_or(16);
        if depth == 0 || depth > recv_wr {
            let hint = format!(
                "the stream's QPs' receive queues hold {recv_wr} each (`max_recv_wr`, default 16)"
            );
            self.err(
                Some(s.at("receive")),
                format!("a receive depth of {depth}: give 1 to {recv_wr}"),
                Some(hint),
            );
        }
        let low_water = r.low_water.unwrap_or(depth.saturating_sub(1));
        if low_water >= depth {
            self.err(Some(s.at("receive")), format!("a low water mark of {low_water} with {depth} receives: it goes below the depth"), Some("receives are reposted once no more than `low_water` are left".into()));
        }
        let need = u64::from(content.max_len()) * u64::from(depth) * qps as u64;
        let mr = match (verb, &r.mr) {
            (StreamVerb::WriteImm, None) => None,
            (StreamVerb::WriteImm, Some(_)) => {
                self.err(Some(s.at("receive")), "a `write_imm` stream's data goes to `remote`; its receives hold no bytes: leave out `receive.mr`", None);
                None
            }
            (_, None) => {
                self.err(
                    Some(s.at("receive")),
                    "a `send` stream's receives need an MR to land in: `receive = { mr = \"…\" }`",
                    None,
                );
                None
            }
            (_, Some(mr)) => Some(mr.clone()),
        };
        if let Some(mr) = &mr {
            match self.mr_file(peer, mr) {
                None => {
                    let hint = name_hint(mr, self.mr_names_on(peer));
                    self.err(Some(s.at("receive")), format!("no MR `{mr}` on `{peer}`"), hint);
                }
                Some(m) if r.offset.saturating_add(need) > m.size.value => self.err(
                    Some(s.at("receive")),
                    format!("{depth} receives of {} bytes on each of {qps} QPs need {need} bytes from offset {} of MR `{mr}` on `{peer}`, which has {}", content.max_len(), r.offset, m.size.value),
                    None,
                ),
                Some(_) => {}
            }
        }
        ReceiveSpec { mr, offset: r.offset, depth, low_water }
    }

    /// A stream's remote end: an MR of the peer that holds it.
    fn stream_remote(
        &mut self,
        s: &file::StepFile,
        peer: &str,
        verb: StreamVerb,
        remote: &Remote,
        remote_span: u64,
    ) {
        if remote.mw.is_some() {
            self.err(
                Some(s.at("remote")),
                "a stream addresses an MR of the peer (`mr = …`), not a window",
                None,
            );
        } else if remote.rkey.is_none() {
            match self.mr_file(peer, &remote.mr) {
                None => {
                    let hint = name_hint(&remote.mr, self.mr_names_on(peer));
                    self.err(Some(s.at("remote")), format!("no MR `{}` on `{peer}`", remote.mr), hint);
                }
                Some(m) if remote.offset.saturating_add(remote_span) > m.size.value => self.err(
                    Some(s.at("remote")),
                    format!("the stream needs {remote_span} bytes from offset {} of MR `{}` on `{peer}`, which has {}", remote.offset, remote.mr, m.size.value),
                    Some("to provoke NAKs on purpose, set `rkey` too".into()),
                ),
                Some(_) if matches!(verb, StreamVerb::Atomic { .. }) && remote.offset % 8 != 0 => {
                    self.err(Some(s.at("remote")), format!("an atomic's target is 8-byte aligned; offset {} is not", remote.offset), None)
                }
                Some(_) => {}
            }
        }
    }

    /// A step's remote end: an MR of the peer as written, or where the peer's
    /// memory window was last bound (an error when no earlier step binds it).
    fn remote(&mut self, s: &file::StepFile, on: &str, qp: &str, r: &file::Remote) -> Remote {
        let at = Some(s.at("remote"));
        match (&r.mr, &r.mw) {
            (Some(mr), None) => Remote { mr: mr.clone(), offset: r.offset, rkey: r.rkey, mw: None },
            (None, Some(w)) => {
                let Some(peer) = self.peer_of(on, qp) else {
                    return Remote {
                        mr: String::new(),
                        offset: r.offset,
                        rkey: r.rkey,
                        mw: Some(w.clone()),
                    };
                };
                match self.bound.get(&(peer.clone(), w.clone())).cloned() {
                    Some((mr, off, len)) => {
                        if r.offset >= len && r.rkey.is_none() {
                            self.err(at, format!("offset {} is past the end of memory window `{w}` ({len} bytes bound)", r.offset), Some("to provoke a NAK on purpose, set `rkey` too".into()));
                        }
                        Remote { mr, offset: off + r.offset, rkey: r.rkey, mw: Some(w.clone()) }
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
                        Remote {
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
                        Remote {
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
                Remote { mr: String::new(), offset: r.offset, rkey: r.rkey, mw: None }
            }
        }
    }

    /// The size of the MR a remote end lies in (0 when there is none).
    fn remote_size(&self, on: &str, qp: &str, r: &Remote) -> u64 {
        self.peer_of(on, qp).and_then(|p| self.mr_file(&p, &r.mr)).map_or(0, |m| m.size.value)
    }

    /// A step on an SRQ of its own endpoint.
    fn srq_step(&mut self, s: &file::StepFile, on: &str, srq: &str) -> bool {
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
    fn qp_step(
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

    fn sges(
        &mut self,
        s: &file::StepFile,
        on: &str,
        sge: &[file::Sge],
        atomic: bool,
        _kind: QpType,
    ) -> Vec<Sge> {
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
            if g.offset + len > size {
                self.err(
                    Some(s.at("sge")),
                    format!(
                        "SGE {}: {}+{len} runs past the end of MR `{}` ({size} bytes)",
                        j + 1,
                        g.offset,
                        g.mr
                    ),
                    None,
                );
            }
            if atomic && len != 8 {
                self.err(
                    Some(s.at("sge")),
                    "an atomic's local buffer is 8 bytes (the old value lands there)",
                    Some("len = 8".into()),
                );
            }
            out.push(Sge {
                mr: g.mr.clone(),
                offset: g.offset,
                len: len.min(u32::MAX as u64) as u32,
            });
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn post(
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
        if q.qp_type == QpType::Ud
            && (remote.is_some() || !matches!(verb, Verb::Send | Verb::SendImm { .. }))
        {
            self.err(
                Some(s.at("op")),
                format!("{op} on UD QP `{qp}`: UD carries SENDs only"),
                None,
            );
        }
        if q.qp_type == QpType::Uc && (matches!(verb, Verb::Read { .. }) || atomic || rc_only) {
            self.err(Some(s.at("op")), format!("{op} on UC QP `{qp}`: UC has no READ, atomics, ATOMIC WRITE, FLUSH or SEND with Invalidate"), Some("use an RC QP".into()));
        }
        let kind = q.qp_type;
        let sge = self.sges(s, on, sge, atomic, kind);
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
                Some(size) if r.offset >= size && r.rkey.is_none() => self.err(
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
                Err(e) => self.err(
                    Some(s.at("flags")),
                    format!("unknown flag `{f}`"),
                    e.suggestion.map(|m| format!("did you mean `{m}`?")),
                ),
            }
        }
        Some(Step::Post { on: on.to_string(), qp: qp.to_string(), wr_id, sge, flags: fl, verb })
    }

    /// A probe's wait must be sane on its own, and the probes' waits together must
    /// leave the scenario time to finish (reported at the probe that overruns).
    fn check_settle(&mut self, s: &file::StepFile, ms: u64, before: u64, timeout: u64) {
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

    /// A probe step: the packet must be one we can build, aimed at what exists.
    fn probe(
        &mut self,
        s: &file::StepFile,
        p: &ProbeFile,
        q: &file::QpFile,
        on: &str,
    ) -> Option<Probe> {
        let at = Some(s.at("probe"));
        let peer = if q.between[0] == on { q.between[1].clone() } else { q.between[0].clone() };
        let transport = match q.qp_type {
            QpType::Rc => dissector::wire::Transport::Rc,
            QpType::Uc => dissector::wire::Transport::Uc,
            QpType::Ud => dissector::wire::Transport::Ud,
        };
        let opcode = match &p.opcode {
            file::OpcodeRef::Number(n) => Opcode(*n),
            file::OpcodeRef::Name(n) => match Opcode::from_name(n, transport) {
                Some(o) => o,
                None => {
                    let known: Vec<&str> = Opcode::names(transport).collect();
                    let hint = match dissector::text::did_you_mean(n.trim(), known.iter().copied()) {
                        Some(m) => format!("did you mean `{m}`? (a name as `roce decode` prints it, or a number)"),
                        None => "a name as `roce decode` prints it (\"RDMA WRITE Only\", \"UD SEND Only\") or a number".into(),
                    };
                    self.err(at, format!("unknown opcode `{n}` for a {transport} QP"), Some(hint));
                    return None;
                }
            },
        };
        let psn = match p.psn.as_ref().map(psn_at).transpose() {
            Ok(x) => x.unwrap_or(PsnAt::Next(0)),
            Err(e) => {
                self.err(at.clone(), e, None);
                PsnAt::Next(0)
            }
        };
        let headers = opcode.info().map_or(Headers::PAYLOAD, |i| i.headers);
        let addressed = headers.contains(Headers::RETH) || headers.contains(Headers::ATOMICETH);
        match &p.remote {
            None if addressed => self.err(at.clone(), format!("{opcode} carries a remote address: give `remote = {{ mr = … }}`, an MR on `{peer}`"), Some("set `rkey` in it to send a wrong one".into())),
            Some(_) if !addressed => self.err(at.clone(), format!("{opcode} has no RETH or AtomicETH to put a remote address in"), None),
            Some(r) if r.mw.is_some() || r.mr.is_none() => self.err(at.clone(), "a probe's `remote` names an MR of the target: `remote = { mr = … }`", None),
            Some(r) if self.mr_file(&peer, r.mr.as_deref().unwrap_or("")).is_none() => {
                let mr = r.mr.as_deref().unwrap_or("");
                let hint = name_hint(mr, self.mr_names_on(&peer));
                self.err(at.clone(), format!("no MR `{mr}` on `{peer}`, the target of the probe"), hint)
            }
            _ => {}
        }
        let payload = match probe_payload(p.payload.as_ref(), p.len) {
            Err(e) => {
                self.err(at.clone(), e, None);
                Vec::new()
            }
            Ok(b) if !b.is_empty() && !headers.contains(Headers::PAYLOAD) => {
                self.err(at.clone(), format!("{opcode} carries no payload"), None);
                b
            }
            Ok(b) if b.len() > 4096 => {
                self.err(
                    at.clone(),
                    format!("a payload of {} bytes: more than the largest MTU", b.len()),
                    Some("one packet carries at most the path MTU (4096)".into()),
                );
                b
            }
            Ok(b) => b,
        };
        if p.copies.is_some_and(|c| c == 0 || c > 64) {
            self.err(at, "1 to 64 copies", None);
        }
        Some(Probe {
            id: p.id.clone(),
            opcode,
            psn,
            moves_next: p.moves_next.unwrap_or(psn == PsnAt::Next(0)),
            remote: p.remote.as_ref().map(|r| Remote {
                mr: r.mr.clone().unwrap_or_default(),
                offset: r.offset,
                rkey: r.rkey,
                mw: None,
            }),
            dma_len: p.dma_len,
            payload,
            imm_data: p.imm_data.unwrap_or(0),
            compare: p.compare.unwrap_or(0),
            swap_add: p.swap.or(p.add).unwrap_or(0),
            ack_req: p.ack_req.unwrap_or(true),
            bad_icrc: p.bad_icrc.unwrap_or(false),
            p_key: p.p_key.unwrap_or(DEFAULT_PKEY),
            dest_qp: p.dest_qp,
            q_key: p.q_key.unwrap_or(DEFAULT_QKEY),
            copies: p.copies.unwrap_or(1).clamp(1, 64),
            settle_ms: p.settle_ms.unwrap_or(DEFAULT_SETTLE_MS).min(MAX_SETTLE_MS),
        })
    }

    fn faults(&mut self) -> Vec<Fault> {
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

    fn patterns(&mut self, list: &Option<Vec<Sp<String>>>, what: &str) -> Option<Vec<Pattern>> {
        let list = list.as_ref()?;
        let mut out = Vec::new();
        for p in list {
            match p.parse::<Pattern>() {
                Ok(x) => out.push(x),
                Err(e) => {
                    let (m, hint) = split_suggestion(&e);
                    let m = if what == "responses" {
                        m.replacen("unknown opcode", "unknown response", 1)
                    } else {
                        m
                    };
                    self.err(Some(p.span.clone()), m, hint);
                }
            }
        }
        Some(out)
    }

    fn expectations(&mut self, mrs: &[Mr], steps: &[Step]) -> Expectations {
        let f = self.f;
        let mut e = Expectations::default();
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
                        er.suggestion.map(|m| format!("did you mean `{m}`?")),
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
                        er.suggestion.map(|m| format!("did you mean `{m}`?")),
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
            e.completion.push(CompletionExpect {
                on: c.on.value.clone(),
                wr_id: c.wr_id,
                index: c.index,
                status,
                opcode,
                byte_len: c.byte_len,
                imm_data: c.imm_data,
                invalidated: c.invalidated.as_ref().map(|w| w.value.clone()),
                count: c.count,
                within_ms: c.within_ms,
                record_deviation: c.record_deviation == Some(true),
            });
        }
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
            });
        }
        for v in &f.expect.event {
            self.endpoint_ok(v.on.span.clone(), &v.on);
            let kind = match v.event.parse::<EventType>() {
                Ok(k) => k,
                Err(er) => {
                    self.err(
                        Some(v.event.span.clone()),
                        format!("unknown event `{}`", v.event.value),
                        er.suggestion.map(|m| format!("did you mean `{m}`?")),
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
            e.event.push(EventExpect {
                on: v.on.value.clone(),
                kind,
                srq: v.srq.as_ref().map(|n| n.value.clone()),
                count: v.count,
            });
        }
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
            let stream = m.stream.as_ref().map(|id| (id, stream_step(steps, id)));
            let mut offset = m.offset;
            let want = match (&m.equals, m.unchanged.unwrap_or(false), stream) {
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
                    let at = match st.verb {
                        StreamVerb::Write | StreamVerb::WriteImm => {
                            st.remote.as_ref().map(|r| (&st.peer, &r.mr, r.offset))
                        }
                        StreamVerb::Read => Some((&st.on, &st.local_mr, st.local_offset)),
                        StreamVerb::Atomic { .. } | StreamVerb::Send | StreamVerb::Receive => None,
                    };
                    match at {
                        None if st.verb == StreamVerb::Send => {
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
                    Memory::Stream { id: id.value.clone(), content: st.content }
                }
                _ => {
                    self.err(Some(m.mr.span.clone()), "say what the memory holds: `equals = …`, `unchanged = true` or `stream = \"…\"` (one of them)", None);
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
        for x in &f.expect.stream {
            match stream_step(steps, &x.id) {
                None => {
                    let ids = streams(steps).map(|st| st.id.as_str());
                    let hint = name_hint(&x.id, ids);
                    self.err(
                        Some(x.id.span.clone()),
                        format!("no stream step named `{}`", x.id.value),
                        hint,
                    );
                }
                Some(st) => {
                    let completed = x.completed.unwrap_or(st.content.count);
                    if completed > st.content.count {
                        self.err(
                            Some(x.id.span.clone()),
                            format!("{completed} completed of a stream of {}", st.content.count),
                            None,
                        );
                    }
                    e.stream.push(StreamExpect {
                        id: st.id.clone(),
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
            if !e.stream.iter().any(|x| x.id == st.id) {
                e.stream.push(StreamExpect {
                    id: st.id.clone(),
                    on: st.on.clone(),
                    completed: st.content.count,
                    max_ack_latency_ms: None,
                });
            }
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::WcOpcode;

    const GOOD: &str = r#"
name = "RC SEND"
[endpoints.a]
[endpoints.b]

[[qp]]
name = "q"
type = "rc"
between = ["a", "b"]

[[mr]]
name = "rbuf"
on = "b"
size = 64
access = ["local_write"]

[[mr]]
name = "msg"
on = "a"
size = 64
init = { text = "hello" }

[[step]]
on = "b"
op = "post_recv"
qp = "q"
wr_id = 1
sge = [{ mr = "rbuf" }]

[[step]]
on = "a"
op = "send"
qp = "q"
wr_id = 2
sge = [{ mr = "msg", len = 5 }]

[[expect.completion]]
on = "b"
wr_id = 1
status = "IBV_WC_SUCCESS"
opcode = "recv"

[[expect.wire]]
qp = "q"
from = "a"
sequence = ["SEND Only"]
responses = ["Acknowledge+"]

[[expect.memory]]
on = "b"
mr = "rbuf"
equals = { text = "hello" }
"#;

    const PROBE: &str = r#"
name = "probe"
[endpoints.a]
[endpoints.b]

[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]

[[mr]]
name = "target"
on = "b"
size = 16
access = ["local_write", "remote_write"]

[[step]]
on = "a"
op = "probe"
qp = "q"
probe = { id = "one", opcode = "RDMA WRITE Only", remote = { mr = "target" }, len = 8, settle_ms = 600 }

[[step]]
on = "a"
op = "probe"
qp = "q"
probe = { id = "two", opcode = "RDMA WRITE Only", remote = { mr = "target" }, len = 8, settle_ms = 600 }
"#;

    #[test]
    fn probe_waits_are_bounded_and_fit_the_timeout() {
        parse_str(Path::new("t.toml"), PROBE).unwrap_or_else(|e| panic!("{}", e[0]));
        // One wait far too long: located at its `settle_ms`.
        let e = errors(&PROBE.replacen("settle_ms = 600", "settle_ms = 600000", 1));
        assert_eq!(e.len(), 1, "{e:#?}");
        let m = e[0].to_string();
        assert!(m.contains("t.toml:21:") && m.contains("at most 10000 ms, not 600000"), "{m}");
        // Each wait sane, together longer than the scenario: reported at the second.
        let e = errors(&format!("timeout_ms = 1100\n{PROBE}"));
        assert_eq!(e.len(), 1, "{e:#?}");
        let m = e[0].to_string();
        assert!(
            m.contains("t.toml:28:")
                && m.contains("wait 1200 ms in all")
                && m.contains("1100 ms timeout"),
            "{m}"
        );
        parse_str(Path::new("t.toml"), &format!("timeout_ms = 1201\n{PROBE}"))
            .unwrap_or_else(|e| panic!("{}", e[0]));
    }

    #[test]
    fn scenario_timeout_is_bounded() {
        for bad in ["0", "999", "3600001", "9223372036854775807"] {
            let e = errors(&format!("timeout_ms = {bad}\n{GOOD}"));
            assert_eq!(e.len(), 1, "{e:#?}");
            let m = e[0].to_string();
            assert!(
                m.starts_with("t.toml:1:14: ") && m.contains(&format!("a timeout of {bad} ms")),
                "{m}"
            );
        }
        parse_str(Path::new("t.toml"), &format!("timeout_ms = 3600000\n{GOOD}"))
            .unwrap_or_else(|e| panic!("{}", e[0]));
    }

    fn errors(text: &str) -> Vec<Diagnostic> {
        match parse_str(Path::new("t.toml"), text) {
            Ok(_) => panic!("should not parse"),
            Err(e) => e,
        }
    }

    const STREAM: &str = r#"
name = "stream"
[endpoints.a]
[endpoints.b]
[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]
max_send_wr = 64
[[mr]]
name = "src"
on = "a"
size = 640000
access = ["local_write"]
[[mr]]
name = "dst"
on = "b"
size = 640000
access = ["local_write", "remote_write"]
[[step]]
op = "stream"
id = "w"
on = "a"
qp = "q"
verb = "write"
count = 10000
window = 32
signal_every = 8
local = { mr = "src" }
remote = { mr = "dst" }
[[expect.stream]]
id = "w"
[[expect.memory]]
on = "b"
mr = "dst"
stream = "w"
"#;

    #[test]
    fn a_stream_loads_with_its_defaults_and_its_checks() {
        let sc = parse_str(Path::new("t.toml"), STREAM).unwrap_or_else(|e| panic!("{}", e[0]));
        let Step::Stream(st) = &sc.steps[0] else { panic!("{:?}", sc.steps[0]) };
        assert_eq!(
            (st.peer.as_str(), st.qps.clone(), st.window, st.signal_every),
            ("b", vec!["q".to_string()], 32, 8)
        );
        assert_eq!(
            st.content,
            StreamContent {
                seed: 1,
                count: 10000,
                sizes: Sizes::Fixed(64),
                ring: None,
                spread: Spread::RoundRobin
            }
        );
        assert_eq!(
            sc.expect.stream,
            vec![StreamExpect {
                id: "w".into(),
                on: "a".into(),
                completed: 10000,
                max_ack_latency_ms: None
            }]
        );
        assert!(
            matches!(&sc.expect.memory[0].want, Memory::Stream { id, content } if id == "w" && content.count == 10000)
        );
    }

    /// A ring: 10,000 messages of 64..=1024 bytes go round 64 KiB, so MRs far
    /// smaller than the stream's bytes hold it, and the memory check knows.
    #[test]
    fn a_ring_lets_a_long_stream_go_round_a_small_region() {
        let text = STREAM
            .replace("window = 32", "window = 32\nring = 65536\nsize = { min = 64, max = 1024 }");
        let sc = parse_str(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{}", e[0]));
        let Step::Stream(st) = &sc.steps[0] else { panic!() };
        assert_eq!(st.content.ring, Some(65536));
        assert!(
            st.content.total() > 640_000 && st.content.span() <= 65536,
            "{} bytes round {}",
            st.content.total(),
            st.content.span()
        );
        assert!(
            matches!(&sc.expect.memory[0].want, Memory::Stream { content, .. } if content.ring == Some(65536))
        );
    }

    #[test]
    fn a_stream_that_does_not_fit_says_where_and_why() {
        let cases = [
            // 10,000 × 65 bytes do not fit the 640,000-byte MRs.
            (STREAM.replace("window = 32", "window = 32\nsize = 65"), "t.toml:30:", "the stream needs 650000 bytes from offset 0 of MR `src`, which has 640000"),
            (STREAM.replace("window = 32", "window = 65"), "t.toml:27:", "a window of 65: give 1 to 64"),
            (STREAM.replace("signal_every = 8", "signal_every = 33"), "t.toml:28:", "signalling every 33-th message: give 1 to the window (32)"),
            (STREAM.replace("verb = \"write\"", "verb = \"wirte\""), "t.toml:25:", "a stream of `wirte`"),
            (STREAM.replace("count = 10000", "count = 0"), "t.toml:26:", "a stream of 0 messages"),
            (STREAM.replace("qp = \"q\"", "qp = \"q\"\nqps = [\"q\"]"), "t.toml:", "say which QPs carry the stream"),
            (STREAM.replace("id = \"w\"\n[[expect.memory]]", "id = \"x\"\n[[expect.memory]]"), "t.toml:32:", "no stream step named `x`"),
            (STREAM.replace("on = \"b\"\nmr = \"dst\"\nstream", "on = \"a\"\nmr = \"src\"\nstream"), "t.toml:36:", "stream `w` lands in MR `dst` on `b` from offset 0"),
            (STREAM.replace("verb = \"write\"", "verb = \"write\"\nadd = 1"), "t.toml:", "`add` is for a `fetch_add` or `atomics` stream"),
            (STREAM.replace("verb = \"write\"", "verb = \"fetch_add\"\ncmp_swap_every = 3"), "t.toml:", "`cmp_swap_every` is for an `atomics` stream"),
            (STREAM.replace("qp = \"q\"", "qps = [\"q\", \"q\"]").replace("verb = \"write\"", "verb = \"atomics\""), "t.toml:24:7:", "an `atomics` stream with CmpSwap over 2 QPs"),
            (STREAM.replace("window = 32", "window = 32\nring = 2000"), "t.toml:", "a ring of 2000 bytes: with a window of 32, messages of up to 64 bytes need at least 2176"),
            (STREAM.replace("verb = \"write\"", "verb = \"read\"\nring = 4096"), "t.toml:", "`ring` is for `write`, `write_imm` and `send` streams: a READ stream reads the peer's MR"),
            (STREAM.replace("window = 32", "window = 32\nring = 20000000"), "t.toml:", "a ring of 20000000 bytes: at most 16777216"),
        ];
        for (text, at, what) in cases {
            let e = errors(&text);
            let m = e[0].to_string();
            assert!(m.starts_with(at) && m.contains(what), "{what}: {m}");
        }
        // A large MR is not read back whole: `equals` there is refused.
        let big = STREAM
            .replace(
                "size = 640000\naccess = [\"local_write\", \"remote_write\"]",
                "size = 640000\naccess = [\"local_write\", \"remote_write\"]\ninit = { u64 = 1 }",
            )
            .replace("stream = \"w\"", "equals = { u64 = 1 }");
        let m = errors(&big)[0].to_string();
        assert!(
            m.contains("MR `dst` has 640000 bytes: MRs larger than 524288 are not read back whole")
                && m.contains("stream = "),
            "{m}"
        );
    }

    /// A place checked more than once (both ends of a QP, every QP of a group) is
    /// one problem, said once.
    #[test]
    fn one_problem_is_said_once() {
        let access = GOOD.replace(
            "between = [\"a\", \"b\"]",
            "between = [\"a\", \"b\"]\naccess = [\"flush_globl\"]",
        );
        let e = errors(&access);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].to_string().contains("unknown access flag `flush_globl`"), "{}", e[0]);
        let group = STREAM.replace("name = \"q\"\ntype", "name = \"q\"\ncount = 3\ntype")
            + "[[expect.wire]]\nqp = \"q\"\nfrom = \"a\"\nrnr_naks = \"0-4\"\n";
        let e = errors(&group);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].to_string().contains("`0-4` is not a count"), "{}", e[0]);
    }

    #[test]
    fn a_qp_count_makes_that_many_and_what_names_it_applies_to_each() {
        let text = STREAM.replace("name = \"q\"\ntype", "name = \"q\"\ncount = 3\ntype")
            + "[[expect.wire]]\nqp = \"q\"\nfrom = \"a\"\nmax_retransmissions = 5\nrnr_naks = \"0..2\"\n[[fault]]\nrule = \"drop prob=0.01 seed=7\"\nfrom = \"a\"\nqp = \"q\"\n";
        let sc = parse_str(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{}", e[0]));
        let names: Vec<&str> = sc.qps.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(names, ["q[0]", "q[1]", "q[2]"]);
        let Step::Stream(st) = &sc.steps[0] else { panic!() };
        assert_eq!(st.qps, ["q[0]", "q[1]", "q[2]"], "a stream on the group goes over all of them");
        let wire: Vec<&str> = sc.expect.wire.iter().map(|w| w.qp.as_str()).collect();
        assert_eq!(wire, ["q[0]", "q[1]", "q[2]"]);
        assert!(sc
            .expect
            .wire
            .iter()
            .all(|w| w.max_retransmissions == Some(5) && w.rnr_naks == Some((0, 2))));
        let faults: Vec<Option<&str>> = sc.faults.iter().map(|f| f.qp.as_deref()).collect();
        assert_eq!(faults, [Some("q[0]"), Some("q[1]"), Some("q[2]")]);
        // A single work request names one of them.
        let one = text.replace(
            "[[step]]\nop = \"stream\"",
            "[[step]]\nop = \"send\"\non = \"a\"\nqp = \"q\"\n[[step]]\nop = \"stream\"",
        );
        let m = errors(&one)[0].to_string();
        assert!(m.contains("`q` is 3 QPs (`count = 3`)") && m.contains("`q[0]` to `q[2]`"), "{m}");
        let m = errors(&STREAM.replace("name = \"q\"\ntype", "name = \"q\"\ncount = 0\ntype"))[0]
            .to_string();
        assert!(m.starts_with("t.toml:7:") && m.contains("a count of 0: give 1 to 256"), "{m}");
    }

    #[test]
    fn count_ranges_include_both_ends() {
        assert_eq!(count_range("0..10"), Ok((0, 10)));
        assert_eq!(count_range("5.."), Ok((5, u64::MAX)));
        assert_eq!(count_range("..3"), Ok((0, 3)));
        assert_eq!(count_range("2"), Ok((2, 2)));
        assert_eq!(count_range("1..=4"), Ok((1, 4)));
        assert!(count_range("4..1").is_err_and(|m| m.contains("is empty")));
        assert!(count_range("a..b").is_err_and(|m| m.contains("`a` is not a count")));
    }

    /// WRITEs with immediate: the peer's MR as a WRITE stream's, and receives of
    /// no bytes; dealt at random when asked.
    #[test]
    fn a_write_imm_stream_writes_the_peers_mr_and_consumes_its_receives() {
        let imm = STREAM
            .replace("verb = \"write\"", "verb = \"write_imm\"\nspread = \"random\"")
            .replace(
                "remote = { mr = \"dst\" }",
                "remote = { mr = \"dst\" }\nreceive = { depth = 16 }",
            );
        let sc = parse_str(Path::new("t.toml"), &imm).unwrap_or_else(|e| panic!("{}", e[0]));
        let Step::Stream(st) = &sc.steps[0] else { panic!() };
        assert_eq!((st.verb, st.content.spread), (StreamVerb::WriteImm, Spread::Random));
        assert_eq!(st.receive, Some(ReceiveSpec { mr: None, offset: 0, depth: 16, low_water: 15 }));
        assert!(
            matches!(&sc.expect.memory[0].want, Memory::Stream { id, .. } if id == "w"),
            "its memory is checked as a WRITE's"
        );
        let cases = [
            (
                imm.replace("receive = { depth = 16 }", ""),
                "a `write_imm` stream writes the peer's MR and consumes its receives",
            ),
            (
                imm.replace("receive = { depth = 16 }", "receive = { mr = \"dst\" }"),
                "its receives hold no bytes: leave out `receive.mr`",
            ),
            (imm.replace("spread = \"random\"", "spread = \"randm\""), "a spread of `randm`"),
        ];
        for (text, what) in cases {
            let m = errors(&text)[0].to_string();
            assert!(m.contains(what), "{what}: {m}");
        }
        parse_str(
            Path::new("t.toml"),
            &imm.replace("receive = { depth = 16 }", "receive = { depth = 16 }\nring = 4096"),
        )
        .unwrap_or_else(|e| panic!("{}", e[0]));
        let send = STREAM
            .replace("verb = \"write\"", "verb = \"send\"")
            .replace("remote = { mr = \"dst\" }", "receive = { depth = 8 }");
        assert!(errors(&send)[0]
            .to_string()
            .contains("a `send` stream's receives need an MR to land in"));
    }

    #[test]
    fn a_send_stream_names_the_peers_receives_and_they_must_fit() {
        let send = STREAM
            .replace("verb = \"write\"", "verb = \"send\"")
            .replace(
                "remote = { mr = \"dst\" }",
                "receive = { mr = \"dst\", depth = 8, low_water = 2 }",
            )
            .replace("[[expect.memory]]\non = \"b\"\nmr = \"dst\"\nstream = \"w\"\n", "");
        let sc = parse_str(Path::new("t.toml"), &send).unwrap_or_else(|e| panic!("{}", e[0]));
        let Step::Stream(st) = &sc.steps[0] else { panic!() };
        assert_eq!((st.verb, st.remote.clone()), (StreamVerb::Send, None));
        assert_eq!(
            st.receive,
            Some(ReceiveSpec { mr: Some("dst".into()), offset: 0, depth: 8, low_water: 2 })
        );
        let cases = [
            (
                send.replace(
                    "receive = { mr = \"dst\", depth = 8, low_water = 2 }",
                    "remote = { mr = \"dst\" }",
                ),
                "a `send` stream goes to the peer's receives",
            ),
            (send.replace("depth = 8", "depth = 17"), "a receive depth of 17: give 1 to 16"),
            (
                send.replace("low_water = 2", "low_water = 8"),
                "a low water mark of 8 with 8 receives",
            ),
            (
                send.replace("depth = 8, low_water = 2", "offset = 639990"),
                "16 receives of 64 bytes on each of 1 QPs need 1024 bytes from offset 639990",
            ),
            (
                send.clone() + "[[expect.memory]]\non = \"b\"\nmr = \"dst\"\nstream = \"w\"\n",
                "stream `w` sends: the peer checks each message as it arrives",
            ),
            (
                STREAM.replace("remote = { mr = \"dst\" }", "receive = { mr = \"dst\" }"),
                "`receive` is for a `send` or `write_imm` stream",
            ),
        ];
        for (text, what) in cases {
            let m = errors(&text)[0].to_string();
            assert!(m.contains(what), "{what}: {m}");
        }
    }

    #[test]
    fn a_good_scenario_loads() {
        let sc = parse_str(Path::new("t.toml"), GOOD).unwrap_or_else(|e| panic!("{}", e[0]));
        assert_eq!(sc.steps.len(), 2);
        let seq: Vec<String> =
            sc.expect.wire[0].sequence.iter().flatten().map(|p| p.to_string()).collect();
        assert_eq!(seq, ["SEND Only"]);
        assert_eq!(sc.qps[0].access["a"], Access::REMOTE_ALL, "the default");
        assert_eq!(
            (sc.qps[0].timeout, sc.qps[0].retry_cnt, sc.qps[0].mtu),
            (14, 7, 1024),
            "defaults filled in"
        );
        assert_eq!(sc.mrs[1].access, Access::LOCAL_WRITE);
        assert!(
            matches!(&sc.steps[1], Step::Post { verb: Verb::Send, sge, .. } if sge[0].len == 5)
        );
        assert_eq!(sc.expect.completion[0].opcode, Some(WcOpcode(128)));
    }

    #[test]
    fn unknown_key_is_located_with_a_suggestion() {
        let text = GOOD.replace("access = [\"local_write\"]", "acess = [\"local_write\"]");
        let e = errors(&text);
        assert_eq!(e.len(), 1);
        let line = text.lines().position(|l| l.starts_with("acess")).unwrap() + 1;
        assert_eq!((e[0].line, e[0].col), (line, 1), "{}", e[0]);
        assert!(e[0].message.contains("acess"), "{}", e[0]);
        assert_eq!(e[0].hint.as_deref(), Some("did you mean `access`?"));
        assert!(e[0].to_string().starts_with(&format!("t.toml:{line}:1: error:")), "{}", e[0]);
        assert!(e[0].excerpt.as_deref().is_some_and(|x| x.contains("^^^^^")), "{}", e[0]);
    }

    #[test]
    fn syntax_errors_say_where() {
        let e = errors("name = \"x\"\n[endpoints.a\n");
        assert_eq!(e[0].line, 2, "{}", e[0]);
        assert!(e[0].message.starts_with("TOML syntax"), "{}", e[0]);
    }

    #[test]
    fn every_semantic_problem_is_reported_where_it_is() {
        let text = GOOD
            .replace("between = [\"a\", \"b\"]", "between = [\"a\", \"c\"]")
            .replace("sge = [{ mr = \"msg\", len = 5 }]", "sge = [{ mr = \"msgg\", len = 5 }]")
            .replace("status = \"IBV_WC_SUCCESS\"", "status = \"IBV_WC_SUCESS\"")
            .replace("sequence = [\"SEND Only\"]", "sequence = [\"SEND Onyl\"]");
        let e = errors(&text);
        let msgs: Vec<String> = e.iter().map(|d| d.to_string()).collect();
        let find = |needle: &str| {
            msgs.iter()
                .find(|m| m.contains(needle))
                .unwrap_or_else(|| panic!("no `{needle}` in {msgs:#?}"))
        };
        assert!(find("no endpoint `c`").contains("t.toml:9:"), "{msgs:#?}");
        assert!(find("no MR `msgg` on `a`").contains("did you mean `msg`?"));
        assert!(find("unknown status `IBV_WC_SUCESS`").contains("did you mean `IBV_WC_SUCCESS`?"));
        assert!(find("unknown opcode `SEND Onyl`").contains("did you mean `SEND Only`?"));
    }

    #[test]
    fn verbs_that_the_qp_type_cannot_carry_are_refused() {
        let text = GOOD.replace("type = \"rc\"", "type = \"uc\"").replace(
            "[[expect.completion]]",
            "[[step]]\non = \"a\"\nop = \"read\"\nqp = \"q\"\nsge = [{ mr = \"msg\" }]\nremote = { mr = \"rbuf\", offset = 3 }\n\n[[expect.completion]]",
        );
        let e = errors(&text);
        assert!(e.iter().any(|d| d.message.contains("UC has no READ")), "{e:#?}");
        // A key an op does not have, and one it needs: serde's own refusal, at the key.
        let text = GOOD.replace("op = \"send\"", "op = \"fetch_add\"");
        let e = errors(&text);
        let all: String = e.iter().map(|d| d.to_string() + "\n").collect();
        assert!(all.contains("missing field `remote`"), "{all}");
        let line = text.lines().position(|l| l.starts_with("op = \"fetch_add\"")).unwrap() - 1;
        assert!(all.contains(&format!("t.toml:{line}:")), "the step's table: {all}");
        let text = GOOD.replace("op = \"send\"", "op = \"fetch_add\"\nremote = { mr = \"rbuf\" }");
        let all: String = errors(&text).iter().map(|d| d.to_string() + "\n").collect();
        assert!(all.contains("missing field `add`"), "{all}");
        let text = GOOD
            .replace("op = \"send\"", "op = \"fetch_add\"\nremote = { mr = \"rbuf\" }\nadd = 1");
        let all: String = errors(&text).iter().map(|d| d.to_string() + "\n").collect();
        assert!(all.contains("8 bytes"), "{all}");
        let text = GOOD.replace("op = \"send\"", "op = \"send\"\nremote = { mr = \"rbuf\" }");
        let e = errors(&text);
        assert!(e[0].message.starts_with("unknown field `remote`"), "a SEND has no remote: {e:#?}");
        let line = text.lines().position(|l| l.starts_with("remote = ")).unwrap() + 1;
        assert_eq!(e[0].line, line, "at the key: {e:#?}");
        let e = errors(&GOOD.replace("op = \"send\"", "op = \"sned\""));
        assert!(
            e[0].message.contains("unknown variant `sned`")
                && e[0].hint.as_deref() == Some("did you mean `send`?"),
            "{e:#?}"
        );
    }

    #[test]
    fn content_payloads_and_psns() {
        assert_eq!(Content::Bytes("de ad".into()).try_bytes(0).unwrap(), [0xde, 0xad]);
        assert_eq!(
            Content::Pattern("ab 01".into()).try_bytes(5).unwrap(),
            [0xab, 1, 0xab, 1, 0xab]
        );
        assert_eq!(Content::U64(1).try_bytes(0).unwrap(), [1, 0, 0, 0, 0, 0, 0, 0]);
        assert!(Content::Bytes("abc".into()).try_bytes(0).unwrap_err().contains("odd"));
        assert!(Content::Bytes("zz".into()).try_bytes(0).unwrap_err().contains("not a hex byte"));
        assert!(Content::Pattern("".into()).try_bytes(4).unwrap_err().contains("empty"));
        assert_eq!(
            probe_payload(Some(&Content::Pattern("ab".into())), Some(3)).unwrap(),
            [0xab; 3]
        );
        assert_eq!(probe_payload(None, Some(2)).unwrap(), [0, 0]);
        assert!(probe_payload(Some(&Content::Text("toolong".into())), Some(2))
            .unwrap_err()
            .contains("`len` is 2"));
        assert_eq!(psn_at(&PsnRef::Relative("next + 3".into())), Ok(PsnAt::Next(3)));
        assert_eq!(psn_at(&PsnRef::Relative("next-1".into())), Ok(PsnAt::Next(-1)));
        assert_eq!(psn_at(&PsnRef::Absolute(5)), Ok(PsnAt::Absolute(Psn::new(5))));
        assert!(psn_at(&PsnRef::Absolute(1 << 24)).unwrap_err().contains("24 bits"));
        assert!(psn_at(&PsnRef::Relative("nxt".into())).unwrap_err().contains("is not a PSN"));
        assert!(psn_at(&PsnRef::Relative("next+8388608".into())).unwrap_err().contains("half"));
        assert_eq!(PsnAt::Next(-1).resolve(Psn::new(0)), Psn::new(0xff_ffff), "24-bit wrap");
    }

    const MW: &str = r#"
name = "mw"
requires = ["mw_type2"]
[endpoints.a]
[endpoints.b]

[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]

[[mr]]
name = "msg"
on = "a"
size = 8

[[mr]]
name = "target"
on = "b"
size = 32
access = ["local_write", "mw_bind"]

[[mw]]
name = "w"
on = "b"
type = 2

[[step]]
on = "b"
op = "bind_mw"
qp = "q"
mw = "w"
mr = "target"
offset = 8
len = 16

[[step]]
on = "a"
op = "write"
qp = "q"
sge = [{ mr = "msg" }]
remote = { mw = "w", offset = 4 }

[[step]]
on = "a"
op = "send_inv"
qp = "q"
invalidate = { mw = "w" }
"#;

    /// A WRITE through a window lands where the window was bound (its MR, the
    /// bind's offset plus its own), its rkey left to the run; a window not bound
    /// before the step, or not there, is refused where it is named.
    #[test]
    fn a_window_is_addressed_where_it_was_bound() {
        let sc = parse_str(Path::new("t.toml"), MW).unwrap_or_else(|e| panic!("{}", e[0]));
        assert_eq!(sc.mws, vec![MwSpec { name: "w".into(), on: "b".into(), kind: MwKind::Type2 }]);
        match &sc.steps[1] {
            Step::Post { verb: Verb::Write { remote }, .. } => assert_eq!(
                remote,
                &Remote { mr: "target".into(), offset: 12, rkey: None, mw: Some("w".into()) }
            ),
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(&sc.steps[0], Step::Post { verb: Verb::BindMw { len: 16, access, .. }, .. } if *access == Access(2)),
            "remote_write by default: {:?}",
            sc.steps[0]
        );
        assert!(
            matches!(&sc.steps[2], Step::Post { verb: Verb::SendInv { invalidate: Invalidate::Mw(w) }, .. } if w == "w")
        );
        // Without the bind: not bound, said at the WRITE's `remote`.
        let unbound = MW.replace("[[step]]\non = \"b\"\nop = \"bind_mw\"\nqp = \"q\"\nmw = \"w\"\nmr = \"target\"\noffset = 8\nlen = 16\n", "");
        let e = errors(&unbound);
        assert_eq!(e.len(), 1, "{e:#?}");
        assert!(
            e[0].message.contains("memory window `w` of `b` is not bound before this step"),
            "{e:#?}"
        );
        let line = unbound.lines().position(|l| l.starts_with("remote = { mw")).unwrap() + 1;
        assert_eq!(e[0].line, line);
        let e = errors(&MW.replace("invalidate = { mw = \"w\" }", "invalidate = { mw = \"x\" }"));
        assert!(
            e[0].message.contains("no memory window `x` on `b`")
                && e[0].hint.as_deref() == Some("did you mean `w`?"),
            "{e:#?}"
        );
        let e = errors(&MW.replace(
            "remote = { mw = \"w\", offset = 4 }",
            "remote = { mw = \"w\", mr = \"target\" }",
        ));
        assert!(e[0].message.contains("one of them"), "{e:#?}");
        let e = errors(&MW.replace("len = 16", "len = 32"));
        assert!(e[0].message.contains("8+32 runs past the end of MR `target`"), "{e:#?}");
    }

    /// What a scenario uses must be in `requires`, or a device without it would
    /// fail the scenario instead of skipping it; the error is at what needs it.
    #[test]
    fn features_used_must_be_required() {
        let e = errors(&MW.replace("requires = [\"mw_type2\"]", "requires = []"));
        assert_eq!(e.len(), 1, "{e:#?}");
        assert!(e[0].message.contains("this needs `mw_type2` (type 2 memory windows)"), "{e:#?}");
        assert!(
            e[0].hint.as_deref().is_some_and(|h| h.contains("requires = [\"mw_type2\"]")),
            "{e:#?}"
        );
        let line = MW.lines().position(|l| l == "type = 2").unwrap() + 1;
        assert_eq!(e[0].line, line, "at the window's type");
        let e = errors(
            &MW.replace("requires = [\"mw_type2\"]", "requires = [\"mw_type2\", \"atomic_wirte\"]"),
        );
        assert!(
            e[0].message == "unknown feature `atomic_wirte`"
                && e[0].hint.as_deref() == Some("did you mean `atomic_write`?"),
            "{e:#?}"
        );
        // An access flag a 6.1 kernel refuses counts as using FLUSH.
        let e = errors(&MW.replace(
            "access = [\"local_write\", \"mw_bind\"]",
            "access = [\"local_write\", \"mw_bind\", \"flush_global\"]",
        ));
        assert!(e.iter().any(|d| d.message.contains("this needs `flush` (RDMA FLUSH)")), "{e:#?}");
        let flush = GOOD.replace("name = \"RC SEND\"", "name = \"f\"\nrequires = [\"flush\", \"atomic_write\"]").replace(
            "[[expect.completion]]",
            "[[step]]\non = \"a\"\nop = \"flush\"\nqp = \"q\"\nremote = { mr = \"rbuf\", offset = 16 }\nlevel = \"mr\"\n\n[[step]]\non = \"a\"\nop = \"atomic_write\"\nqp = \"q\"\nremote = { mr = \"rbuf\", offset = 8 }\nvalue = { u64 = 1 }\n\n[[expect.completion]]",
        );
        let sc = parse_str(Path::new("t.toml"), &flush).unwrap_or_else(|e| panic!("{}", e[0]));
        assert_eq!(sc.requires, [Feature::AtomicWrite, Feature::Flush]);
        assert!(
            matches!(
                &sc.steps[2],
                Step::Post {
                    verb: Verb::Flush {
                        len: 48,
                        placement: Placement::Global,
                        level: Selectivity::Mr,
                        ..
                    },
                    ..
                }
            ),
            "{:?}",
            sc.steps[2]
        );
        assert!(matches!(
            &sc.steps[3],
            Step::Post { verb: Verb::AtomicWrite { value: [1, 0, 0, 0, 0, 0, 0, 0], .. }, .. }
        ));
        let e = errors(
            &flush.replace("requires = [\"flush\", \"atomic_write\"]", "requires = [\"flush\"]"),
        );
        assert!(e.len() == 1 && e[0].message.contains("this needs `atomic_write`"), "{e:#?}");
        let e = errors(
            &flush
                .replace("value = { u64 = 1 }", "value = { bytes = \"01 02\" }")
                .replace("level = \"mr\"", "level = \"all\""),
        );
        let all: String = e.iter().map(|d| d.to_string() + "\n").collect();
        assert!(
            all.contains("8 bytes, not 2") && all.contains("unknown selectivity level `all`"),
            "{all}"
        );
        let e = errors(&flush.replace("offset = 8 }\nvalue", "offset = 4 }\nvalue"));
        assert!(e[0].message.contains("8-byte aligned"), "{e:#?}");
        let e = errors(&flush.replace("type = \"rc\"", "type = \"uc\""));
        assert!(e.iter().any(|d| d.message.contains("atomic_write on UC QP `q`")), "{e:#?}");
    }

    /// An SRQ is on one end of the QPs that use it; steps and events name it.
    #[test]
    fn srqs_belong_to_an_end() {
        let text = GOOD.replace("name = \"RC SEND\"", "name = \"s\"\nrequires = [\"srq\"]\n[[srq]]\nname = \"s\"\non = \"b\"")
            .replace("between = [\"a\", \"b\"]", "between = [\"a\", \"b\"]\nsrq = \"s\"")
            .replace("op = \"post_recv\"\nqp = \"q\"", "op = \"post_srq_recv\"\nsrq = \"s\"")
            .replace("[[expect.wire]]", "[[expect.event]]\non = \"b\"\nevent = \"srq_limit_reached\"\nsrq = \"s\"\n\n[[expect.wire]]");
        let sc = parse_str(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{}", e[0]));
        assert_eq!(sc.qps[0].srq.as_deref(), Some("s"));
        assert!(matches!(&sc.steps[0], Step::PostSrqRecv { srq, wr_id: 1, .. } if srq == "s"));
        assert_eq!(sc.expect.event[0].kind, EventType(15));
        let e = errors(
            &text.replace("srq = \"s\"\n\n[[expect.wire]]", "srq = \"t\"\n\n[[expect.wire]]"),
        );
        assert!(
            e[0].message.contains("no SRQ `t`")
                && e[0].hint.as_deref() == Some("did you mean `s`?"),
            "{e:#?}"
        );
        let e =
            errors(&text.replace(
                "on = \"b\"\nop = \"post_srq_recv\"",
                "on = \"a\"\nop = \"post_srq_recv\"",
            ));
        assert!(e[0].message.contains("SRQ `s` is on `b`, not on `a`"), "{e:#?}");
        let e = errors(&text.replace("requires = [\"srq\"]", ""));
        assert!(e[0].message.contains("this needs `srq`"), "{e:#?}");
        let e =
            errors(&text.replace("event = \"srq_limit_reached\"", "event = \"srq_limit_reachd\""));
        assert!(
            e[0].hint.as_deref() == Some("did you mean `IBV_EVENT_SRQ_LIMIT_REACHED`?"),
            "{e:#?}"
        );
    }

    /// A NAK key, an opcode pattern, a completion status: each name comes from its
    /// one home and a typo gets that home's suggestion.
    #[test]
    fn names_from_the_vocabulary() {
        let text = GOOD.replace("responses = [\"Acknowledge+\"]", "responses = [\"Acknowledge+\"]\nnaks = [\"invalid_rd_request\", \"rnr\", \"remote_acess_error\"]");
        let e = errors(&text);
        assert_eq!(e.len(), 1, "{e:#?}");
        assert!(
            e[0].message == "unknown NAK `remote_acess_error`"
                && e[0].hint.as_deref() == Some("did you mean `remote_access_error`?"),
            "{e:#?}"
        );
        let ok = text.replace(", \"remote_acess_error\"", "");
        let sc = parse_str(Path::new("t.toml"), &ok).unwrap_or_else(|e| panic!("{}", e[0]));
        assert_eq!(
            sc.expect.wire[0].naks,
            Some(vec![NakKind::Nak(dissector::wire::NakCode::InvalidRdRequest), NakKind::Rnr])
        );
        let e =
            errors(&GOOD.replace(
                "responses = [\"Acknowledge+\"]",
                "responses = [\"NAK Invalid RD Reqest\"]",
            ));
        assert!(
            e[0].message.contains("unknown response `NAK Invalid RD Reqest`")
                && e[0].hint.as_deref() == Some("did you mean `NAK Invalid RD Request`?"),
            "{e:#?}"
        );
    }
}
