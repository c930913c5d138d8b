//! The conformance catalogue: the testable rules a RoCE device must follow
//! (`conformance/catalogue.toml`, embedded in the binary), read into typed
//! [`Section`]s and [`Rule`]s and checked: ids unique and well formed, every rule in
//! a known section, a non-observable rule with its reason. Scenarios name rules by
//! id (`spec = [...]`); `roce coverage` counts them per chapter and section.
//!
//! Owns: [`Catalogue`], its [`Section`]s and [`Rule`]s, reading and checking it
//! ([`Catalogue::parse`], [`Catalogue::shipped`]), [`CatalogueError`]. Imports:
//! dissector's `UnknownName` (the did-you-mean of an unknown id); `serde`, `toml`.
//! Nothing of the crate above it.
use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use dissector::diag::line_col;
use dissector::text::UnknownName;
use serde::{Deserialize, Serialize};
use toml::Spanned;

/// Where the shipped catalogue lives in the repository (its diagnostics name it).
pub(crate) const PATH: &str = "conformance/catalogue.toml";

/// The shipped catalogue's text, built into the binary so it works anywhere.
const SHIPPED: &str = include_str!("../../conformance/catalogue.toml");

/// Whose behaviour a rule binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    Responder,
    Requester,
    Both,
}

/// A transport a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Transport {
    Rc,
    Uc,
    Ud,
    Xrc,
}

/// How a test sees whether a rule holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Observation {
    Wire,
    /// A work completion, or a verb's immediate result.
    Completion,
    Memory,
    AsyncEvent,
}

/// What an observable rule no scenario covers yet waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum WaitsOn {
    /// The scenario format cannot say it yet.
    Format,
    /// The format can say it, but the lab's device (Soft-RoCE) or its link
    /// cannot show it; hardware may.
    Device,
    /// The format can say it and the lab can show it: no one has written the
    /// scenario yet.
    Scenario,
}

impl WaitsOn {
    /// As `roce coverage` heads its list.
    pub(crate) fn heading(self) -> &'static str {
        match self {
            WaitsOn::Format => "the format (it cannot say them yet)",
            WaitsOn::Device => "the device or the lab (Soft-RoCE cannot show them)",
            WaitsOn::Scenario => "a scenario (sayable and observable here, not written yet)",
        }
    }
}

/// Why an observable rule is not covered yet.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Waits {
    pub(crate) on: WaitsOn,
    pub(crate) why: String,
}

/// An area of rules: its id is the prefix of its rules' ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section {
    pub(crate) id: String,
    /// The IBA chapter or annex that groups it (`9 Transport layer`, `A17 RoCEv2`).
    pub(crate) chapter: String,
    pub(crate) iba: String,
    pub(crate) title: String,
}

/// One testable rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) id: String,
    /// The id of its [`Section`].
    pub(crate) section: String,
    pub(crate) iba: String,
    /// The compliance statement (`C9-92`), where a checked source cites one.
    pub(crate) compliance: Option<String>,
    /// The rule in one line.
    pub(crate) rule: String,
    pub(crate) role: Role,
    pub(crate) transports: Vec<Transport>,
    pub(crate) observed_by: Vec<Observation>,
    pub(crate) observable: bool,
    /// Why it is not observable.
    pub(crate) reason: Option<String>,
    /// For an observable rule no scenario covers yet: what it waits on.
    pub(crate) waits: Option<Waits>,
}

/// The catalogue, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Catalogue {
    /// In file order.
    pub(crate) sections: Vec<Section>,
    /// In file order.
    pub(crate) rules: Vec<Rule>,
}

/// One problem in a catalogue file, at its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) line: usize,
    pub(crate) col: usize,
    pub(crate) message: String,
}

/// Why a catalogue file is not a catalogue: every problem found, each at
/// `file:line:col`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CatalogueError {
    pub(crate) file: String,
    pub(crate) problems: Vec<Problem>,
}

impl fmt::Display for CatalogueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}:{}:{}: {}", self.file, p.line, p.col, p.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for CatalogueError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default)]
    section: Vec<SectionShape>,
    #[serde(default)]
    rule: Vec<RuleShape>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SectionShape {
    id: Spanned<String>,
    chapter: Spanned<String>,
    iba: String,
    title: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleShape {
    id: Spanned<String>,
    iba: Spanned<String>,
    #[serde(default)]
    compliance: Option<Spanned<String>>,
    rule: Spanned<String>,
    role: Role,
    transports: Spanned<Vec<Transport>>,
    observed_by: Spanned<Vec<Observation>>,
    #[serde(default = "yes")]
    observable: bool,
    #[serde(default)]
    reason: Option<Spanned<String>>,
    #[serde(default)]
    waits: Option<Spanned<Waits>>,
}

fn yes() -> bool {
    true
}

/// `resp.dup.atomic-replays-saved-result`: dot-separated words of lowercase
/// letters, digits and single hyphens.
fn well_formed(id: &str) -> bool {
    !id.is_empty()
        && id.split('.').all(|w| {
            !w.is_empty()
                && !w.starts_with('-')
                && !w.ends_with('-')
                && !w.contains("--")
                && w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
}

/// `C9-92`, `C10-93.1.1`, `o10-37.2.30`, `C17-7.a1`: a compliance statement number.
fn compliance_ok(c: &str) -> bool {
    let Some(rest) = c.strip_prefix('C').or_else(|| c.strip_prefix('o')) else { return false };
    let Some((chapter, number)) = rest.split_once('-') else { return false };
    let chapter_ok = !chapter.is_empty()
        && (chapter.chars().all(|c| c.is_ascii_digit())
            || (chapter.starts_with('A') && chapter[1..].chars().all(|c| c.is_ascii_digit())));
    chapter_ok
        && !number.is_empty()
        && number.split('.').all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric()))
        && number.starts_with(|c: char| c.is_ascii_digit())
}

/// The problems found in a catalogue's text, each at its line and column.
struct Problems<'t> {
    text: &'t str,
    found: Vec<Problem>,
}

impl Problems<'_> {
    fn at(&mut self, span: Range<usize>, message: String) {
        let (line, col) = line_col(self.text, span.start);
        self.found.push(Problem { line, col, message });
    }

    /// A list that must name something, and nothing twice.
    fn listed<T: Ord>(&mut self, id: &str, what: &str, list: &Spanned<Vec<T>>) {
        let l = list.get_ref();
        if l.is_empty() {
            self.at(list.span(), format!("rule `{id}`: `{what}` is empty"));
        }
        if l.len() != l.iter().collect::<BTreeSet<_>>().len() {
            self.at(list.span(), format!("rule `{id}`: `{what}` names one twice"));
        }
    }
}

impl Catalogue {
    /// The catalogue built into the binary, read once.
    pub(crate) fn shipped() -> Result<&'static Catalogue, CatalogueError> {
        static ONCE: OnceLock<Result<Catalogue, CatalogueError>> = OnceLock::new();
        ONCE.get_or_init(|| Catalogue::parse(PATH, SHIPPED)).as_ref().map_err(Clone::clone)
    }

    /// Reads and checks catalogue text; `file` names it in the problems.
    pub(crate) fn parse(file: &str, text: &str) -> Result<Catalogue, CatalogueError> {
        let fail = |problems| CatalogueError { file: file.to_string(), problems };
        let mut p = Problems { text, found: Vec::new() };
        let shape: FileShape = toml::from_str(text).map_err(|e| {
            p.at(e.span().unwrap_or(0..0), e.message().trim().to_string());
            fail(std::mem::take(&mut p.found))
        })?;
        let (sections, section_ids) = Self::sections(shape.section, &mut p);
        let mut rule_ids = BTreeSet::new();
        let rules = shape
            .rule
            .into_iter()
            .map(|r| Self::rule_of(r, &section_ids, &mut rule_ids, &mut p))
            .collect();
        if p.found.is_empty() {
            Ok(Catalogue { sections, rules })
        } else {
            Err(fail(p.found))
        }
    }

    /// The `[[section]]`s, each id well formed and defined once.
    fn sections(
        shapes: Vec<SectionShape>,
        p: &mut Problems<'_>,
    ) -> (Vec<Section>, BTreeSet<String>) {
        let mut sections = Vec::new();
        let mut ids = BTreeSet::new();
        for s in shapes {
            let id = s.id.get_ref();
            if !well_formed(id) {
                p.at(
                    s.id.span(),
                    format!("section id `{id}` is not dotted lowercase words (a-z, 0-9, -)"),
                );
            } else if !ids.insert(id.clone()) {
                p.at(s.id.span(), format!("section `{id}` is defined twice"));
            }
            if s.chapter.get_ref().trim().is_empty() {
                p.at(s.chapter.span(), format!("section `{id}` has an empty chapter"));
            }
            sections.push(Section {
                id: s.id.into_inner(),
                chapter: s.chapter.into_inner(),
                iba: s.iba,
                title: s.title,
            });
        }
        if sections.is_empty() {
            p.at(0..0, "no [[section]]: every rule belongs to one".into());
        }
        (sections, ids)
    }

    /// One `[[rule]]`: its id well formed, defined once and in a known section,
    /// every field said.
    fn rule_of(
        r: RuleShape,
        section_ids: &BTreeSet<String>,
        rule_ids: &mut BTreeSet<String>,
        p: &mut Problems<'_>,
    ) -> Rule {
        let id = r.id.get_ref().clone();
        let span = r.id.span();
        if !well_formed(&id) {
            p.at(
                span.clone(),
                format!("rule id `{id}` is not dotted lowercase words (a-z, 0-9, -)"),
            );
        } else if !rule_ids.insert(id.clone()) {
            p.at(span.clone(), format!("rule `{id}` is defined twice"));
        }
        let section = Self::section_of(&id, span.clone(), section_ids, p);
        if r.iba.get_ref().trim().is_empty() {
            p.at(r.iba.span(), format!("rule `{id}` names no IBA section"));
        }
        if let Some(c) = &r.compliance {
            if !compliance_ok(c.get_ref()) {
                p.at(
                    c.span(),
                    format!(
                        "`{}` is not a compliance statement number (C9-92, o10-37.2.30)",
                        c.get_ref()
                    ),
                );
            }
        }
        if r.rule.get_ref().trim().is_empty() || r.rule.get_ref().contains('\n') {
            p.at(r.rule.span(), format!("rule `{id}` must say the rule in one line"));
        }
        p.listed(&id, "transports", &r.transports);
        p.listed(&id, "observed_by", &r.observed_by);
        match (&r.reason, r.observable) {
            (None, false) => {
                p.at(span, format!("rule `{id}` is not observable but gives no `reason`"))
            }
            (Some(x), false) if x.get_ref().trim().is_empty() => {
                p.at(x.span(), format!("rule `{id}`: the `reason` is empty"))
            }
            (Some(x), true) => p.at(
                x.span(),
                format!("rule `{id}` is observable: a `reason` is for `observable = false`"),
            ),
            _ => {}
        }
        if let Some(w) = &r.waits {
            if !r.observable {
                p.at(w.span(), format!("rule `{id}` is not observable: `waits` is for observable rules no scenario covers yet"));
            } else if w.get_ref().why.trim().is_empty() {
                p.at(w.span(), format!("rule `{id}`: `waits` says what it waits on but not why"));
            }
        }
        Rule {
            id,
            section,
            iba: r.iba.into_inner(),
            compliance: r.compliance.map(Spanned::into_inner),
            rule: r.rule.into_inner(),
            role: r.role,
            transports: r.transports.into_inner(),
            observed_by: r.observed_by.into_inner(),
            observable: r.observable,
            reason: r.reason.map(Spanned::into_inner),
            waits: r.waits.map(Spanned::into_inner),
        }
    }

    /// A rule's section: the longest section id its id starts with (and a dot).
    fn section_of(
        id: &str,
        span: Range<usize>,
        section_ids: &BTreeSet<String>,
        p: &mut Problems<'_>,
    ) -> String {
        let longest = section_ids
            .iter()
            .filter(|s| id.strip_prefix(s.as_str()).is_some_and(|rest| rest.starts_with('.')))
            .max_by_key(|s| s.len());
        if let Some(s) = longest {
            return s.clone();
        }
        let head = id.split('.').next().unwrap_or_default();
        let hint =
            UnknownName::among("section", head, head, section_ids.iter().map(String::as_str))
                .hint()
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
        p.at(
            span,
            format!("rule `{id}` is in no known section: its id must start with a section id and a dot{hint}"),
        );
        String::new()
    }

    /// The rule with this id.
    pub(crate) fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// `id` is no rule's: the closest one, if it is close enough to be a typo.
    pub(crate) fn unknown(&self, id: &str) -> UnknownName {
        UnknownName::among("catalogue rule", id, id, self.rules.iter().map(|r| r.id.as_str()))
    }

    /// The section with this id.
    pub(crate) fn section(&self, id: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.id == id)
    }

    /// The sections by chapter, chapters and sections in file order.
    pub(crate) fn chapters(&self) -> Vec<(&str, Vec<&Section>)> {
        let mut out: Vec<(&str, Vec<&Section>)> = Vec::new();
        for s in &self.sections {
            match out.iter_mut().find(|(c, _)| *c == s.chapter) {
                Some((_, v)) => v.push(s),
                None => out.push((s.chapter.as_str(), vec![s])),
            }
        }
        out
    }

    /// The rules of a section, in file order.
    pub(crate) fn rules_of<'a>(&'a self, section: &'a str) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules.iter().filter(move |r| r.section == section)
    }

    /// How many rules each section has (observable ones only when asked).
    #[cfg(test)]
    pub(crate) fn counts(&self, observable_only: bool) -> std::collections::BTreeMap<&str, usize> {
        let mut out = std::collections::BTreeMap::new();
        for r in self.rules.iter().filter(|r| r.observable || !observable_only) {
            *out.entry(r.section.as_str()).or_insert(0) += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalogue_loads_and_is_broad() {
        let c = Catalogue::shipped().unwrap_or_else(|e| panic!("{e}"));
        let observable = c.rules.iter().filter(|r| r.observable).count();
        assert!(observable >= 150, "{observable} observable rules");
        for r in c.rules.iter().filter(|r| !r.observable) {
            assert!(r.reason.as_deref().is_some_and(|x| !x.is_empty()), "{}", r.id);
        }
        // Every area issue 33 §1 names has rules of its own, observable ones.
        let counts = c.counts(true);
        let at_least = |prefix: &str, n: usize| {
            let k: usize = counts
                .iter()
                .filter(|(s, _)| **s == prefix || s.starts_with(&format!("{prefix}.")))
                .map(|(_, k)| k)
                .sum();
            assert!(k >= n, "section {prefix}: {k} observable rules, want {n} or more");
        };
        for (prefix, n) in [
            ("resp.hdr", 10), // TVer, P_Key, DestQP, opcodes, opcode sequence, PadCnt, PMTU, ICRC
            ("op", 20),       // SEND, WRITE, READ, atomics, immediate, invalidate
            ("mpe", 6),       // FLUSH, ATOMIC WRITE
            ("psn", 10),      // regions and the 2^24 wrap for every family
            ("resp.dup", 5),
            ("resp.ack", 6),
            ("req.timer", 3),
            ("req.rnr", 4),
            ("req.gbn", 2),
            ("req.resp", 4), // implied NAK, ghost and duplicate responses
            ("uc", 3),
            ("ud", 5),
            ("err", 4),
            ("qp.state", 8),
            ("mr", 10),
            ("mw", 8),
            ("srq", 3),
            ("cq", 2),
            ("order", 3),
            ("se", 2),
            ("roce", 8),
        ] {
            at_least(prefix, n);
        }
        // The rules the issue spells out by name.
        for id in [
            "resp.dup.atomic-replays-saved-result",
            "psn.wrap-send",
            "psn.wrap-write",
            "psn.wrap-read",
            "psn.wrap-atomic",
            "req.rnr.retry-7-forever",
            "ud.qkey-high-bit-uses-own",
            "ud.size-le-pmtu",
            "uc.loss-drops-message",
            "err.flush-outstanding",
            "cq.overflow-async",
            "order.fence-waits-read-atomic",
            "roce.udp.dst-port",
            "roce.ecn.cnp-on-ce",
        ] {
            assert!(c.rule(id).is_some_and(|r| r.observable), "{id}");
        }
        // Every section has a rule, and every rule's section is one of them.
        for s in &c.sections {
            assert!(c.rules_of(&s.id).next().is_some(), "section {} is empty", s.id);
        }
        assert!(c.rules.iter().all(|r| c.section(&r.section).is_some()));
        assert!(c.chapters().len() >= 4);
    }

    const ONE: &str = "[[section]]\nid = \"psn\"\nchapter = \"9\"\niba = \"9.7.1\"\ntitle = \"PSNs\"\n\n[[rule]]\nid = \"psn.x\"\niba = \"9.7.1\"\nrule = \"A rule.\"\nrole = \"both\"\ntransports = [\"rc\"]\nobserved_by = [\"wire\"]\n";

    #[test]
    fn a_small_catalogue_reads() {
        let c = Catalogue::parse("t.toml", ONE).unwrap();
        assert_eq!(c.rules[0].section, "psn");
        assert!(c.rules[0].observable);
        assert_eq!(c.unknown("psn.y").suggestion.as_deref(), Some("psn.x"));
        assert_eq!(c.unknown("qp.state.zzz").suggestion, None);
    }

    fn problems(text: &str) -> String {
        Catalogue::parse("t.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn a_malformed_catalogue_says_where() {
        // TOML and serde problems, at their line and column.
        assert_eq!(
            problems(&ONE.replace("role = \"both\"", "role = \"bth\"")),
            "t.toml:11:8: unknown variant `bth`, expected one of `responder`, `requester`, `both`"
        );
        let got = problems(&ONE.replace("rule = \"A rule.\"", "rule = \"A rule.\"\nrules = 1"));
        assert!(got.starts_with("t.toml:11:1: unknown field `rules`, expected one of"), "{got}");
        let got = problems(&ONE.replace("[\"wire\"]", "[\"wired\"]"));
        assert!(got.starts_with("t.toml:13:") && got.contains("unknown variant `wired`"), "{got}");
        assert!(problems("[[rule]\n").starts_with("t.toml:1:"));
        // The catalogue's own rules, every one found.
        let twice = format!("{ONE}\n{}", &ONE[ONE.find("[[rule]]").unwrap_or(0)..]);
        assert_eq!(problems(&twice), "t.toml:16:6: rule `psn.x` is defined twice");
        assert_eq!(
            problems(&ONE.replace("id = \"psn.x\"", "id = \"pns.x\"")),
            "t.toml:8:6: rule `pns.x` is in no known section: its id must start with a section id and a dot (did you mean `psn`?)"
        );
        assert!(problems(&ONE.replace("id = \"psn.x\"", "id = \"psn.X\""))
            .contains("`psn.X` is not dotted lowercase"));
        assert_eq!(
            problems(&ONE.replace(
                "observed_by = [\"wire\"]",
                "observed_by = [\"wire\"]\nobservable = false"
            )),
            "t.toml:8:6: rule `psn.x` is not observable but gives no `reason`"
        );
        assert!(problems(
            &ONE.replace("observed_by = [\"wire\"]", "observed_by = [\"wire\"]\nreason = \"x\"")
        )
        .contains("a `reason` is for `observable = false`"));
        let waits = "observed_by = [\"wire\"]\nwaits = { on = \"format\", why = \"no key\" }";
        let c = Catalogue::parse("t.toml", &ONE.replace("observed_by = [\"wire\"]", waits))
            .unwrap_or_else(|p| panic!("{p}"));
        assert_eq!(
            c.rules[0].waits.as_ref().map(|w| (w.on, w.why.as_str())),
            Some((WaitsOn::Format, "no key"))
        );
        assert!(problems(&ONE.replace(
            "observed_by = [\"wire\"]",
            &format!("{waits}\nobservable = false\nreason = \"x\"")
        ))
        .contains("`waits` is for observable rules"));
        assert!(problems(&ONE.replace("observed_by = [\"wire\"]", &waits.replace("no key", " ")))
            .contains("`waits` says what it waits on but not why"));
        assert!(problems(
            &ONE.replace("observed_by = [\"wire\"]", &waits.replace("format", "weather"))
        )
        .contains("unknown variant `weather`"));
        assert!(problems(
            &ONE.replace("iba = \"9.7.1\"\nrule", "iba = \"9.7.1\"\ncompliance = \"C9\"\nrule")
        )
        .contains("`C9` is not a compliance statement number"));
        let both =
            problems(&ONE.replace("[\"rc\"]", "[]").replace("[\"wire\"]", "[\"wire\", \"wire\"]"));
        assert_eq!(both.lines().count(), 2, "{both}");
    }

    #[test]
    fn compliance_numbers() {
        for ok in ["C9-92", "C10-93.1.1", "o10-37.2.30", "C17-7.a1", "CA17-3"] {
            assert!(compliance_ok(ok), "{ok}");
        }
        for bad in ["C9", "9-92", "C9-", "c9-92", "C9-x", "C9-92."] {
            assert!(!compliance_ok(bad), "{bad}");
        }
    }
}
