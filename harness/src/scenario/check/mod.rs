//! From a scenario file as written ([`super::file`]) to a checked scenario
//! ([`super::model`]): every name looked up, every value typed and bounded, every
//! problem found reported at once, each at `file:line:col` with a hint.
//!
//! One [`Checker`] walks the file; each room of the format is an `impl Checker`
//! of its own file, reading the vocabulary this module imports (`use super::*`):
//! [`qps`] (QPs, MRs, memory windows, SRQs), [`steps`] (each `[[step]]` and its
//! work request), [`stream`] (stream steps), [`probe`] (crafted frames), and
//! [`expect`] (expectations and fault rules).
//!
//! Owns: turning a [`super::file::ScenarioFile`] into a [`super::model::Scenario`]
//! or diagnostics. Imports: the file and model shapes, the protocol's stream
//! vocabulary and limits, the verbs vocabulary, and dissector's PSN/NAK/opcode types.
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use dissector::wire::{Headers, NakKind, Opcode, Psn};

use super::cases;
use super::diag::{serde_hint, Diagnostic, Severity, Source};
use super::file::{
    self, Content, PerEndpoint, ProbeFile, PsnRef, PsnsFile, QpType, ScenarioFile, Spanned, StepOp,
};
use super::fixtures;
use super::legacy;
use super::model::*;
use super::pattern::{Atom, Pattern, PatternError, Repeat, ATOMS, MAX_CONDITIONS};
use crate::protocol::stream::STREAM_MESSAGES;
use crate::protocol::{Hex, READ_BACK_MAX};
use crate::vocab::{
    Access, EventType, Feature, MwKind, Placement, QpParams, Selectivity, SendFlag, WcOpcode,
    WcStatus,
};

/// The longest message a stream may post.
const MAX_STREAM_MESSAGE: u32 = 1 << 30;
/// The largest stream ring (`ring`): its memory check keeps 5 bytes per byte.
const MAX_RING: u64 = 16 << 20;

/// The `timeout_ms` a scenario may set.
const TIMEOUT_MS: std::ops::RangeInclusive<u64> = 1_000..=3_600_000;
/// The `completion_grace_ms` a scenario may set.
const GRACE_MS: std::ops::RangeInclusive<u64> = 0..=1_000;
/// The largest MR a scenario may ask for.
const MAX_MR: u64 = 64 << 20;

/// Reads and checks a scenario file: one scenario, or one per case of a
/// parameterised file.
pub(crate) fn load(path: &Path) -> Result<Vec<Scenario>, Vec<Diagnostic>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![Diagnostic {
            severity: Severity::Error,
            file: path.to_path_buf(),
            line: 1,
            col: 1,
            message: format!("cannot read the scenario: {e}"),
            excerpt: None,
            hint: None,
        }]
    })?;
    if fixtures::is_fixture(path, &text) {
        let src = Source::new(path, &text);
        return Err(vec![src.diag(
            None,
            "this is a fixture (under a `fixtures` directory, with no `name`): setup scenarios `use`, not a scenario of its own".to_string(),
            Some(format!("run the scenarios that use it; `roce check {}` checks it through them", path.display())),
        )]);
    }
    parse_cases(path, &text)
}

/// Parses and checks the text of a scenario of one case; `path` names it in the
/// diagnostics.
pub(crate) fn parse_str(path: &Path, text: &str) -> Result<Scenario, Vec<Diagnostic>> {
    let mut all = parse_cases(path, text)?;
    if all.len() == 1 {
        return Ok(all.remove(0));
    }
    let src = Source::new(path, text);
    Err(vec![src.diag(None, format!("{} cases where one scenario was expected", all.len()), None)])
}

/// Parses and checks scenario text: one scenario per case (one for a file
/// without `[cases]` or `[[case]]`). A problem found in several cases is said
/// once, with the cases it is in (none named when it is in every case).
pub(crate) fn parse_cases(path: &Path, text: &str) -> Result<Vec<Scenario>, Vec<Diagnostic>> {
    let src = Source::new(path, text);
    if let Err(e) = text.parse::<toml::Table>() {
        let msg = e.message().trim().to_string();
        return Err(vec![src.diag(
            e.span(),
            format!("TOML syntax: {msg}"),
            Some("see the TOML syntax at toml.io; strings need quotes".into()),
        )]);
    }
    // A file of an older format is read as that format meant it: `old.text` is
    // the file with what it dropped blanked out, every span still the file's.
    let old = legacy::read(&src)?;
    // A scenario that uses fixtures is checked as one text with theirs, each
    // span shown in the file it was written in.
    let composed = fixtures::compose(&src, &old.text, old.format)?;
    let (checked, parts) = match &composed {
        Some(c) => (c.text.as_str(), Some(&c.parts)),
        None => (&*old.text, None),
    };
    let read = Source { file: path, text: checked, map: None, parts };
    let expanded =
        if old.placeholders { cases::expand(&read)? } else { cases::Expanded::plain(checked) };
    let total = expanded.cases.len();
    let mut problems: Vec<(Diagnostic, Vec<Option<String>>)> =
        old.errors.into_iter().map(|d| (d, Vec::new())).collect();
    let fixture_warnings = composed.as_ref().map(|c| c.warnings.clone()).unwrap_or_default();
    let mut warnings: Vec<(Diagnostic, Vec<Option<String>>)> = old
        .warnings
        .into_iter()
        .chain(fixture_warnings)
        .chain(expanded.warnings)
        .map(|d| (d, Vec::new()))
        .collect();
    let shown = if parts.is_some() { checked } else { text };
    let lists = composed.as_ref().map_or(&[][..], |c| &c.lists[..]);
    let mut scenarios = Vec::new();
    for case in &expanded.cases {
        let csrc = Source { file: path, text: shown, map: Some(&case.map), parts };
        match check_case(&csrc, case, lists) {
            Ok(mut sc) => {
                for w in std::mem::take(&mut sc.warnings) {
                    note(&mut warnings, w, &case.label);
                }
                scenarios.push(sc);
            }
            Err(ds) => ds.into_iter().for_each(|d| note(&mut problems, d, &case.label)),
        }
    }
    if !problems.is_empty() {
        return Err(problems.into_iter().map(|(d, c)| in_cases(d, &c, total)).collect());
    }
    // Warnings go with the first case: `roce check` prints them once.
    if let Some(first) = scenarios.first_mut() {
        first.warnings = warnings.into_iter().map(|(d, c)| in_cases(d, &c, total)).collect();
    }
    Ok(scenarios)
}

/// `d`, found in case `label`: a new problem, or one more case of a known one.
fn note(seen: &mut Vec<(Diagnostic, Vec<Option<String>>)>, d: Diagnostic, label: &Option<String>) {
    match seen.iter_mut().find(|(x, _)| *x == d) {
        Some((_, cases)) => cases.push(label.clone()),
        None => seen.push((d, vec![label.clone()])),
    }
}

/// `d`'s message with the cases it was found in, unless it is in all of them.
fn in_cases(mut d: Diagnostic, cases: &[Option<String>], total: usize) -> Diagnostic {
    let named: Vec<&String> = cases.iter().flatten().collect();
    if named.is_empty() || named.len() == total {
        return d;
    }
    let shown: Vec<String> = named.iter().take(3).map(|c| format!("`{c}`")).collect();
    let more = match named.len().saturating_sub(3) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let which = if named.len() == 1 { "case" } else { "cases" };
    d.message = format!("{} (in {which} {}{more})", d.message, shown.join(", "));
    d
}

/// One case's text, read and checked (its spans mapped to the file by `src`).
/// `lists` are the `requires` and `spec` names of the fixtures the scenario uses,
/// with their spans in the composed text.
fn check_case(
    src: &Source,
    case: &cases::Case,
    lists: &[(&'static str, String, Range<usize>)],
) -> Result<Scenario, Vec<Diagnostic>> {
    let mut f: ScenarioFile = toml::from_str(&case.text).map_err(|e| {
        let msg = e.message().trim().to_string();
        let hint =
            serde_hint(&msg).or_else(|| Some("`roce schema` prints every key and its type".into()));
        vec![src.diag(e.span(), msg, hint)]
    })?;
    for (id, span) in &case.spec {
        if !f.spec.iter().any(|s| s.value == *id) {
            f.spec.push(Spanned { value: id.clone(), span: span.clone() });
        }
    }
    for (key, name, span) in lists {
        let list = if *key == "requires" { &mut f.requires } else { &mut f.spec };
        if !list.iter().any(|s| s.value == *name) {
            let span = case.map.to_text(span.start)..case.map.to_text(span.end);
            list.push(Spanned { value: name.clone(), span });
        }
    }
    let mut out = Vec::new();
    let groups = expand_groups(&mut f, src, &mut out);
    let mut c = Checker {
        src,
        out,
        f: &f,
        bound: BTreeMap::new(),
        uses: Vec::new(),
        groups,
        warnings: Vec::new(),
    };
    let mut sc = c.scenario();
    if let Some(label) = &case.label {
        sc.name = format!("{} [{label}]", sc.name);
        sc.case = Some(label.clone());
    }
    if c.out.is_empty() {
        Ok(sc)
    } else {
        Err(c.out)
    }
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
    /// What loads but deserves a look (`roce check` prints it).
    warnings: Vec<Diagnostic>,
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
                qp: Spanned { value: n, span: w.qp.span.clone() },
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
                qp: Some(Spanned { value: n, span: span.clone() }),
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

/// The stream steps among `steps`.
fn streams(steps: &[Step]) -> impl Iterator<Item = &StreamStep> + Clone {
    steps.iter().filter_map(|s| if let Step::Stream(st) = s { Some(st) } else { None })
}

/// The stream step named `id`.
fn stream_step<'s>(steps: &'s [Step], id: &str) -> Option<&'s StreamStep> {
    streams(steps).find(|st| st.order.id == id)
}

fn name_hint<'b>(word: &str, names: impl IntoIterator<Item = &'b str> + Clone) -> Option<String> {
    dissector::text::UnknownName::among("name", word, word, names.clone()).hint().or_else(|| {
        let all: Vec<&str> = names.into_iter().collect();
        (!all.is_empty() && all.len() <= 12).then(|| format!("known: {}", all.join(", ")))
    })
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
                Err(e) => {
                    self.err(Some(span.clone()), format!("unknown access flag `{f}`"), e.hint())
                }
            }
        }
        a
    }

    fn scenario(&mut self) -> Scenario {
        let f = self.f;
        if f.endpoints.is_empty() {
            self.err(
                None,
                "no endpoints",
                Some("add `[endpoints.a]` and `[endpoints.b]`, here or in a fixture the scenario `use`s".into()),
            );
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
        let grace = match &f.completion_grace_ms {
            Some(g) if !GRACE_MS.contains(&g.value) => {
                self.err(
                    Some(g.span.clone()),
                    format!("a completion grace of {} ms: give {} to {}", g.value, GRACE_MS.start(), GRACE_MS.end()),
                    Some("how long the run polls on once the completions it waits for have come (default 50)".into()),
                );
                None
            }
            g => g.as_ref().map(|g| g.value),
        };
        for (n, d) in f.endpoints.iter().filter_map(|(n, e)| Some((n, e.cq_depth.as_ref()?))) {
            if !crate::protocol::cq_depth_fits(d.value) {
                let max = crate::protocol::MAX_CQ_DEPTH;
                self.err(
                    Some(d.span.clone()),
                    format!("endpoint `{n}`: a CQ of {} completions", d.value),
                    Some(format!("give 1 to {max}")),
                );
            }
        }
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
                        cq_depth: e.cq_depth.as_ref().map(|d| d.value),
                    },
                )
            })
            .collect();
        let mws = self.mws();
        let srqs = self.srqs();
        let qps = self.qps();
        let mrs = self.mrs();
        let (steps, step_answers) = self.steps(timeout);
        let faults = self.faults();
        let mut expect = self.expectations(&mrs, &steps);
        expect.step = step_answers;
        let requires = self.requires();
        let (spec, mut warnings) = self.spec();
        warnings.append(&mut self.warnings);
        Scenario {
            name: f.name.value.clone(),
            timeout: Duration::from_millis(timeout),
            completion_grace_ms: grace,
            endpoints,
            qps,
            mrs,
            steps,
            expect,
            faults,
            requires,
            mws,
            srqs,
            spec,
            warnings,
            case: None,
        }
    }

    /// `spec`, read: every id a rule of the conformance catalogue (unknown ones
    /// refused with the closest id). A scenario naming none loads, with a warning
    /// for `roce check` to show.
    fn spec(&mut self) -> (Vec<String>, Vec<Diagnostic>) {
        let catalogue = match crate::catalogue::Catalogue::shipped() {
            Ok(c) => c,
            Err(e) => {
                self.err(None, format!("the built-in conformance catalogue is broken: {e}"), None);
                return (Vec::new(), Vec::new());
            }
        };
        let mut out: Vec<String> = Vec::new();
        for id in &self.f.spec {
            if catalogue.rule(id.as_str()).is_none() {
                let e = catalogue.unknown(id.as_str());
                let hint = e.hint().or_else(|| {
                    Some(format!(
                        "the rules are in {} (`roce coverage` lists the sections)",
                        crate::catalogue::PATH
                    ))
                });
                self.err(
                    Some(id.span.clone()),
                    format!("unknown catalogue rule `{}`", id.value),
                    hint,
                );
            } else if out.contains(&id.value) {
                self.err(Some(id.span.clone()), format!("`{}` is named twice", id.value), None);
            } else {
                out.push(id.value.clone());
            }
        }
        let mut warnings = Vec::new();
        if self.f.spec.is_empty() {
            let mut d = self.src.diag(
                Some(self.f.name.span.clone()),
                "the scenario names no rule of the conformance catalogue",
                Some(format!(
                    "add `spec = [\"…\"]` with the ids of the rules it checks ({})",
                    crate::catalogue::PATH
                )),
            );
            d.severity = Severity::Warning;
            warnings.push(d);
        }
        (out, warnings)
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
                    let hint = e.hint().or_else(|| {
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
        if a.contains(Access::FLUSH_GLOBAL) {
            self.uses(Feature::Flush, span.clone());
        }
        if a.contains(Access::FLUSH_PERSISTENT) {
            self.uses(Feature::FlushPersistent, span);
        }
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
}

mod expect;
mod probe;
mod qps;
mod steps;
mod stream;
#[cfg(test)]
mod tests;

pub(crate) use probe::{probe_payload, psn_at};
