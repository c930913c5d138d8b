//! `roce coverage`'s tally: how much of the conformance catalogue the scenarios
//! check, per chapter and section (a rule is covered when a scenario names it in
//! `spec`), and, given `suite.json` files, what each setup did per rule: holds,
//! deviates (a deviation recorded), skipped (with the reason) or fails. Its JSON is
//! `roce coverage --json`; `crate::render::coverage` draws it as text and HTML.
//!
//! Owns: the tally and the verdict of one scenario's entry ([`Verdict::of`], also
//! the matrix's). Imports: `crate::catalogue`, `super::suite`.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::suite::{Entry, Suite};
use crate::catalogue::{Catalogue, Rule, WaitsOn};

/// What one setup did for one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Verdict {
    /// No scenario naming it is in the suite.
    NotRun,
    /// Every scenario naming it that ran was skipped.
    Skipped,
    /// The scenarios naming it passed.
    Holds,
    /// They passed, a deviation from the spec recorded (`record_deviation`).
    Deviates,
    /// One of them failed.
    Fails,
}

impl Verdict {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Verdict::NotRun => "not run",
            Verdict::Skipped => "skipped",
            Verdict::Holds => "holds",
            Verdict::Deviates => "deviates",
            Verdict::Fails => "fails",
        }
    }

    /// One scenario's result.
    pub(crate) fn of(e: &Entry) -> Verdict {
        if e.skipped.is_some() {
            Verdict::Skipped
        } else if !e.pass {
            Verdict::Fails
        } else if e
            .observations
            .iter()
            .any(|(k, v)| k.starts_with("deviation: ") && v == "deviates")
        {
            Verdict::Deviates
        } else {
            Verdict::Holds
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct RuleCoverage<'a> {
    pub(crate) id: &'a str,
    /// The scenarios naming it, by file.
    pub(crate) scenarios: Vec<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct SectionCoverage<'a> {
    pub(crate) id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) iba: &'a str,
    pub(crate) observable: usize,
    pub(crate) covered: usize,
    pub(crate) uncovered: Vec<&'a str>,
    pub(crate) rules: Vec<RuleCoverage<'a>>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ChapterCoverage<'a> {
    pub(crate) chapter: &'a str,
    pub(crate) observable: usize,
    pub(crate) covered: usize,
    pub(crate) sections: Vec<SectionCoverage<'a>>,
}

#[derive(Debug, Serialize)]
pub(crate) struct NotObservable<'a> {
    pub(crate) id: &'a str,
    pub(crate) reason: &'a str,
}

/// An observable rule no scenario covers, with what it waits on (`None`: the
/// catalogue does not say).
#[derive(Debug, Serialize)]
pub(crate) struct Waiting<'a> {
    pub(crate) id: &'a str,
    pub(crate) on: Option<WaitsOn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) why: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub(crate) struct RuleVerdict {
    pub(crate) verdict: Verdict,
    /// The scenarios naming the rule, with what each did.
    pub(crate) scenarios: BTreeMap<String, Verdict>,
    /// Why the skipped ones were skipped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) reasons: Vec<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct SetupCoverage {
    pub(crate) suite: String,
    pub(crate) setup: String,
    pub(crate) counts: BTreeMap<Verdict, usize>,
    /// Observable rules only, by id.
    pub(crate) rules: BTreeMap<String, RuleVerdict>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Total {
    pub(crate) observable: usize,
    pub(crate) covered: usize,
    pub(crate) percent: f64,
}

#[derive(Debug, Serialize)]
pub(crate) struct Coverage<'a> {
    pub(crate) rules: usize,
    pub(crate) observable: usize,
    pub(crate) scenarios: usize,
    pub(crate) total: Total,
    pub(crate) chapters: Vec<ChapterCoverage<'a>>,
    pub(crate) not_observable: Vec<NotObservable<'a>>,
    /// The observable rules no scenario covers, in catalogue order.
    pub(crate) waiting: Vec<Waiting<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) setups: Vec<SetupCoverage>,
}

pub(crate) fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (1000.0 * part as f64 / whole as f64).round() / 10.0
    }
}

/// What a setup is called: the profile it was held to, else its devices and
/// kernels, else the file.
pub(crate) fn setup_name(path: &Path, s: &Suite) -> String {
    if let Some(p) = &s.profile {
        return p.clone();
    }
    let facts: BTreeSet<String> = s
        .setup
        .values()
        .flat_map(|m| ["device", "kernel"].into_iter().filter_map(|k| m.get(k).cloned()))
        .collect();
    if facts.is_empty() {
        path.display().to_string()
    } else {
        facts.into_iter().collect::<Vec<_>>().join(", ")
    }
}

/// Per observable rule, the scenarios (name, file) that name it.
pub(crate) type Naming<'a> = BTreeMap<&'a str, Vec<(String, String)>>;

pub(crate) fn tally<'a>(
    catalogue: &'a Catalogue,
    naming: &Naming<'a>,
    scenarios: usize,
    suites: &[(PathBuf, Suite)],
) -> Coverage<'a> {
    let observable = |r: &&Rule| r.observable;
    let mut chapters = Vec::new();
    for (chapter, sections) in catalogue.chapters() {
        let mut out = ChapterCoverage { chapter, observable: 0, covered: 0, sections: Vec::new() };
        for s in sections {
            let rules: Vec<&Rule> = catalogue.rules_of(&s.id).filter(observable).collect();
            let named = |r: &Rule| naming.get(r.id.as_str()).map(Vec::as_slice).unwrap_or(&[]);
            let sc = SectionCoverage {
                id: &s.id,
                title: &s.title,
                iba: &s.iba,
                observable: rules.len(),
                covered: rules.iter().filter(|r| !named(r).is_empty()).count(),
                uncovered: rules
                    .iter()
                    .filter(|r| named(r).is_empty())
                    .map(|r| r.id.as_str())
                    .collect(),
                rules: rules
                    .iter()
                    .map(|r| RuleCoverage {
                        id: &r.id,
                        scenarios: named(r).iter().map(|(_, f)| f.clone()).collect(),
                    })
                    .collect(),
            };
            out.observable += sc.observable;
            out.covered += sc.covered;
            out.sections.push(sc);
        }
        chapters.push(out);
    }
    let (obs, cov) = chapters.iter().fold((0, 0), |(o, c), ch| (o + ch.observable, c + ch.covered));
    let not_observable = catalogue
        .rules
        .iter()
        .filter(|r| !r.observable)
        .map(|r| NotObservable { id: &r.id, reason: r.reason.as_deref().unwrap_or("") })
        .collect();
    let waiting = catalogue
        .rules
        .iter()
        .filter(|r| r.observable && naming.get(r.id.as_str()).is_none_or(Vec::is_empty))
        .map(|r| Waiting {
            id: &r.id,
            on: r.waits.as_ref().map(|w| w.on),
            why: r.waits.as_ref().map(|w| w.why.as_str()),
        })
        .collect();
    let setups = suites
        .iter()
        .map(|(path, suite)| {
            let mut rules = BTreeMap::new();
            let mut counts = BTreeMap::new();
            for r in catalogue.rules.iter().filter(|r| r.observable) {
                let mut per = BTreeMap::new();
                let mut reasons = Vec::new();
                for (name, file) in naming.get(r.id.as_str()).into_iter().flatten() {
                    let v = match suite.scenarios.get(name) {
                        Some(e) => {
                            if let Some(why) = &e.skipped {
                                reasons.push(format!("{file}: {why}"));
                            }
                            Verdict::of(e)
                        }
                        None => Verdict::NotRun,
                    };
                    per.insert(file.clone(), v);
                }
                // The worst that any of its scenarios did; a skipped one does not
                // hide one that ran.
                let verdict = per.values().copied().max().unwrap_or(Verdict::NotRun);
                *counts.entry(verdict).or_insert(0) += 1;
                rules.insert(r.id.clone(), RuleVerdict { verdict, scenarios: per, reasons });
            }
            SetupCoverage {
                suite: path.display().to_string(),
                setup: setup_name(path, suite),
                counts,
                rules,
            }
        })
        .collect();
    Coverage {
        rules: catalogue.rules.len(),
        observable: obs,
        scenarios,
        total: Total { observable: obs, covered: cov, percent: percent(cov, obs) },
        chapters,
        not_observable,
        waiting,
        setups,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pass: bool, skipped: Option<&str>, deviates: bool) -> Entry {
        let mut observations = BTreeMap::new();
        if deviates {
            observations.insert("deviation: wire of QP q from a".to_string(), "deviates".into());
        }
        observations.insert("deviation: memory".to_string(), "holds".into());
        Entry {
            file: "f.toml".into(),
            spec: Vec::new(),
            pass,
            skipped: skipped.map(str::to_string),
            error: None,
            failed: Vec::new(),
            observations,
            counted: Vec::new(),
            deviations: Vec::new(),
            wire: None,
        }
    }

    #[test]
    fn a_scenario_verdict_and_the_worst_wins() {
        assert_eq!(Verdict::of(&entry(true, None, false)), Verdict::Holds);
        assert_eq!(Verdict::of(&entry(true, None, true)), Verdict::Deviates);
        assert_eq!(Verdict::of(&entry(false, None, true)), Verdict::Fails);
        assert_eq!(Verdict::of(&entry(false, Some("no FLUSH"), false)), Verdict::Skipped);
        assert!(Verdict::Fails > Verdict::Deviates);
        assert!(Verdict::Deviates > Verdict::Holds);
        assert!(Verdict::Holds > Verdict::Skipped);
        assert!(Verdict::Skipped > Verdict::NotRun);
    }

    #[test]
    fn tally_counts_per_section_and_per_setup() {
        let c = Catalogue::shipped().unwrap_or_else(|e| panic!("{e}"));
        let mut naming: Naming = BTreeMap::new();
        naming.insert("psn.wrap-send", vec![("s1".into(), "s1.toml".into())]);
        naming.insert(
            "psn.wrap-write",
            vec![("s1".into(), "s1.toml".into()), ("s2".into(), "s2.toml".into())],
        );
        let mut suite = Suite::default();
        suite.scenarios.insert("s1".into(), entry(true, None, false));
        suite.scenarios.insert("s2".into(), entry(true, None, true));
        let t = tally(c, &naming, 2, &[(PathBuf::from("x/suite.json"), suite)]);
        assert_eq!(t.total.covered, 2);
        let psn = t.chapters.iter().flat_map(|ch| &ch.sections).find(|s| s.id == "psn").unwrap();
        assert_eq!(psn.covered, 2);
        assert!(!psn.uncovered.contains(&"psn.wrap-send"));
        let s = &t.setups[0];
        assert_eq!(s.rules["psn.wrap-send"].verdict, Verdict::Holds);
        assert_eq!(s.rules["psn.wrap-write"].verdict, Verdict::Deviates);
        assert_eq!(s.rules["psn.wrap-read"].verdict, Verdict::NotRun);
        assert_eq!(s.counts[&Verdict::Holds], 1);
        assert_eq!(s.setup, "x/suite.json");
    }
}
