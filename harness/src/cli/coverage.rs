//! `roce coverage`: how much of the conformance catalogue the scenarios check, per
//! chapter and section (a rule is covered when a scenario names it in `spec`), and,
//! given `suite.json` files, what each setup did per rule: holds, deviates (a
//! deviation recorded), skipped (with the reason) or fails.
//!
//! Owns: `roce coverage`'s options, the tally and its text and JSON. Imports:
//! `crate::catalogue`, `crate::scenario` (through `super::check::load`),
//! `crate::results::suite` (reading `suite.json`), `super::exit`.
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::exit::{help, CommandResult, Exit, Failure};
use crate::catalogue::{Catalogue, Rule};
use crate::results::suite::{Entry, Suite};

#[derive(Debug, clap::Args)]
#[command(after_help = help(&[
    (Exit::Ok, "the coverage was printed"),
    (Exit::BadInput, "a scenario or suite.json could not be read (an unknown rule id in `spec` is one, with the closest id)"),
]))]
pub struct CoverageArgs {
    /// Scenario files or directories whose `spec` lists count (default: ./scenarios)
    #[arg(long = "scenarios", value_name = "DIR")]
    pub scenarios: Vec<PathBuf>,
    /// suite.json files from `roce suite`, one per setup: what each setup did per rule
    #[arg(value_name = "SUITE.JSON")]
    pub suites: Vec<PathBuf>,
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

/// What one setup did for one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Verdict {
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
    fn name(self) -> &'static str {
        match self {
            Verdict::NotRun => "not run",
            Verdict::Skipped => "skipped",
            Verdict::Holds => "holds",
            Verdict::Deviates => "deviates",
            Verdict::Fails => "fails",
        }
    }

    /// One scenario's result.
    fn of(e: &Entry) -> Verdict {
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
struct RuleCoverage<'a> {
    id: &'a str,
    /// The scenarios naming it, by file.
    scenarios: Vec<String>,
}

#[derive(Debug, Serialize)]
struct SectionCoverage<'a> {
    id: &'a str,
    title: &'a str,
    iba: &'a str,
    observable: usize,
    covered: usize,
    uncovered: Vec<&'a str>,
    rules: Vec<RuleCoverage<'a>>,
}

#[derive(Debug, Serialize)]
struct ChapterCoverage<'a> {
    chapter: &'a str,
    observable: usize,
    covered: usize,
    sections: Vec<SectionCoverage<'a>>,
}

#[derive(Debug, Serialize)]
struct NotObservable<'a> {
    id: &'a str,
    reason: &'a str,
}

#[derive(Debug, Serialize)]
struct RuleVerdict {
    verdict: Verdict,
    /// The scenarios naming the rule, with what each did.
    scenarios: BTreeMap<String, Verdict>,
    /// Why the skipped ones were skipped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reasons: Vec<String>,
}

#[derive(Debug, Serialize)]
struct SetupCoverage {
    suite: String,
    setup: String,
    counts: BTreeMap<Verdict, usize>,
    /// Observable rules only, by id.
    rules: BTreeMap<String, RuleVerdict>,
}

#[derive(Debug, Serialize)]
struct Total {
    observable: usize,
    covered: usize,
    percent: f64,
}

#[derive(Debug, Serialize)]
struct Coverage<'a> {
    rules: usize,
    observable: usize,
    scenarios: usize,
    total: Total,
    chapters: Vec<ChapterCoverage<'a>>,
    not_observable: Vec<NotObservable<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    setups: Vec<SetupCoverage>,
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (1000.0 * part as f64 / whole as f64).round() / 10.0
    }
}

/// What a setup is called: the profile it was held to, else its devices and
/// kernels, else the file.
fn setup_name(path: &Path, s: &Suite) -> String {
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
type Naming<'a> = BTreeMap<&'a str, Vec<(String, String)>>;

fn tally<'a>(
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
        setups,
    }
}

fn text(out: &mut dyn Write, c: &Coverage, from: &str) -> std::io::Result<()> {
    writeln!(
        out,
        "conformance catalogue ({}): {} rules, {} observable; {} scenarios from {from}",
        crate::catalogue::PATH,
        c.rules,
        c.observable,
        c.scenarios
    )?;
    for ch in &c.chapters {
        writeln!(
            out,
            "\n{}: {} of {} covered ({} %)",
            ch.chapter,
            ch.covered,
            ch.observable,
            percent(ch.covered, ch.observable)
        )?;
        for s in &ch.sections {
            writeln!(
                out,
                "  {:<10} {:>3}/{:<3} {} (IBA {})",
                s.id, s.covered, s.observable, s.title, s.iba
            )?;
            if !s.uncovered.is_empty() {
                writeln!(out, "             not covered: {}", s.uncovered.join(", "))?;
            }
        }
    }
    writeln!(
        out,
        "\ntotal: {} of {} observable rules covered ({} %)",
        c.total.covered, c.total.observable, c.total.percent
    )?;
    writeln!(out, "not observable ({}, not counted):", c.not_observable.len())?;
    for n in &c.not_observable {
        writeln!(out, "  {}: {}", n.id, n.reason)?;
    }
    for s in &c.setups {
        let count = |v: Verdict| s.counts.get(&v).copied().unwrap_or(0);
        writeln!(out, "\nsetup {} ({}):", s.setup, s.suite)?;
        writeln!(
            out,
            "  {} holds, {} deviates, {} skipped, {} fails, {} not run",
            count(Verdict::Holds),
            count(Verdict::Deviates),
            count(Verdict::Skipped),
            count(Verdict::Fails),
            count(Verdict::NotRun)
        )?;
        for v in [Verdict::Fails, Verdict::Deviates, Verdict::Skipped] {
            for (id, r) in s.rules.iter().filter(|(_, r)| r.verdict == v) {
                let which: Vec<&str> =
                    r.scenarios.iter().filter(|(_, x)| **x == v).map(|(f, _)| f.as_str()).collect();
                writeln!(out, "  {}: {id} ({})", v.name(), which.join(", "))?;
                for why in &r.reasons {
                    writeln!(out, "      {why}")?;
                }
            }
        }
    }
    Ok(())
}

pub(super) fn run(a: CoverageArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let catalogue = Catalogue::shipped().map_err(Failure::input)?;
    let paths = if a.scenarios.is_empty() {
        let d = PathBuf::from("scenarios");
        if !d.is_dir() {
            return Err(Failure::input(anyhow::anyhow!(
                "roce coverage: no ./scenarios here; say where the scenarios are with --scenarios DIR"
            )));
        }
        vec![d]
    } else {
        a.scenarios.clone()
    };
    let loaded = super::check::load(&paths, "roce coverage", err)?;
    let mut naming: Naming = BTreeMap::new();
    for (file, sc) in &loaded {
        for id in &sc.spec {
            if let Some(r) = catalogue.rule(id).filter(|r| r.observable) {
                naming
                    .entry(r.id.as_str())
                    .or_default()
                    .push((sc.name.clone(), file.display().to_string()));
            }
        }
    }
    let suites = a
        .suites
        .iter()
        .map(|p| Suite::load(p).map(|s| (p.clone(), s)))
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(Failure::input)?;
    let c = tally(catalogue, &naming, loaded.len(), &suites);
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &c)?;
        writeln!(out)?;
    } else {
        let from = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        text(out, &c, &from)?;
    }
    Ok(Exit::Ok)
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
            pass,
            skipped: skipped.map(str::to_string),
            error: None,
            failed: Vec::new(),
            observations,
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
