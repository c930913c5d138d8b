//! `roce matrix`'s grid: every case of the given `suite.json` files (one per
//! setup) × setup, grouped by catalogue section, each cell what that setup did
//! (pass, deviates with the deviation recorded, skipped, fails, or not in that
//! suite) and why; a case whose verdict is not the same on every setup is
//! `changed`. Its JSON is `roce matrix --json`; `crate::render::matrix` draws it.
//!
//! A case belongs to the sections of the rules its `spec` names (`suite.json`
//! records them; for files from before it did, the caller supplies them), in
//! catalogue order; a case naming no rule the catalogue knows goes to the group
//! [`UNCLASSIFIED`], last.
//!
//! Owns: [`Matrix`] and [`build`]. Imports: `crate::catalogue`, `super::suite`,
//! `super::coverage::Verdict` (one scenario's verdict, as `roce coverage` says it).
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::coverage::Verdict;
use super::suite::{Entry, Suite};
use super::Deviation;
use crate::catalogue::Catalogue;

/// The group of cases that name no rule of the catalogue.
pub(crate) const UNCLASSIFIED: &str = "unclassified";

/// What one setup did with one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Cell {
    Pass,
    /// Passed held to the setup's profile, a deviation from the spec recorded.
    Deviates,
    Skipped,
    Fails,
    /// The case is not in that setup's suite.json.
    Absent,
}

impl Cell {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Cell::Pass => "pass",
            Cell::Deviates => "deviates",
            Cell::Skipped => "skipped",
            Cell::Fails => "fails",
            Cell::Absent => "absent",
        }
    }
}

/// One cell: the verdict, and why when it is not a plain pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct CellOf {
    pub(crate) verdict: Cell,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

impl CellOf {
    fn of(e: Option<&Entry>) -> CellOf {
        let Some(e) = e else {
            return CellOf { verdict: Cell::Absent, reason: Some("not in this suite".into()) };
        };
        let deviations = || -> Vec<&str> {
            e.observations
                .iter()
                .filter(|(k, v)| k.starts_with("deviation: ") && *v == "deviates")
                .map(|(k, _)| &k["deviation: ".len()..])
                .collect()
        };
        match Verdict::of(e) {
            Verdict::Skipped => CellOf { verdict: Cell::Skipped, reason: e.skipped.clone() },
            Verdict::Fails => {
                let mut why: Vec<String> = e.failed.clone();
                if let Some(err) = &e.error {
                    why.insert(0, format!("run stopped: {}", err.lines().next().unwrap_or(err)));
                }
                if why.is_empty() {
                    why.push("failed".into());
                }
                CellOf { verdict: Cell::Fails, reason: Some(why.join("; ")) }
            }
            // What IBA says and what the device did, where the run kept it;
            // a suite.json from before names only where it deviated.
            Verdict::Deviates if !e.deviations.is_empty() => CellOf {
                verdict: Cell::Deviates,
                reason: Some(
                    e.deviations.iter().map(Deviation::said).collect::<Vec<_>>().join("; "),
                ),
            },
            Verdict::Deviates => CellOf {
                verdict: Cell::Deviates,
                reason: Some(format!("deviation recorded: {}", deviations().join("; "))),
            },
            Verdict::Holds | Verdict::NotRun => CellOf { verdict: Cell::Pass, reason: None },
        }
    }
}

/// A setup: one suite.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Setup {
    /// The file it was read from.
    pub(crate) suite: String,
    /// Its devices and kernels as recorded, and the profile it was held to.
    pub(crate) name: String,
}

/// One case across the setups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Row {
    pub(crate) case: String,
    pub(crate) file: String,
    /// In the order of [`Matrix::setups`].
    pub(crate) cells: Vec<CellOf>,
    /// The verdict is not the same on every setup.
    pub(crate) changed: bool,
}

/// The cases of one catalogue section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Group {
    /// The section's id, or [`UNCLASSIFIED`].
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) rows: Vec<Row>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Matrix {
    pub(crate) setups: Vec<Setup>,
    pub(crate) groups: Vec<Group>,
    /// Cases (counted once, whatever their groups) whose verdict changes.
    pub(crate) changed: usize,
    pub(crate) cases: usize,
}

/// A setup's name: its devices and kernels as recorded, with the profile it was
/// held to; the file's name when it recorded none.
pub(crate) fn setup_name(path: &str, s: &Suite) -> String {
    let facts: BTreeSet<String> = s
        .setup
        .values()
        .flat_map(|m| ["device", "kernel"].into_iter().filter_map(|k| m.get(k).cloned()))
        .collect();
    let mut name = facts.into_iter().collect::<Vec<_>>().join(" ");
    if let Some(p) = &s.profile {
        name = if name.is_empty() { format!("profile {p}") } else { format!("{name} ({p})") };
    }
    if name.is_empty() {
        path.to_string()
    } else {
        name
    }
}

/// The grid of `suites` (file, suite). `spec_of` gives the rules a case names
/// when its entry does not record them (suite.json from before it did).
pub(crate) fn build(
    catalogue: &Catalogue,
    suites: &[(String, Suite)],
    spec_of: &dyn Fn(&str) -> Vec<String>,
) -> Matrix {
    let setups =
        suites.iter().map(|(p, s)| Setup { suite: p.clone(), name: setup_name(p, s) }).collect();
    let cases: BTreeSet<&String> = suites.iter().flat_map(|(_, s)| s.scenarios.keys()).collect();
    let mut by_section: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    let mut changed = 0;
    for case in &cases {
        let entries: Vec<Option<&Entry>> =
            suites.iter().map(|(_, s)| s.scenarios.get(case.as_str())).collect();
        // Every case came from one of the suites, so one entry at least is there.
        let Some(first) = entries.iter().flatten().next() else { continue };
        let mut spec: Vec<String> =
            entries.iter().flatten().flat_map(|e| e.spec.iter().cloned()).collect();
        if spec.is_empty() {
            spec = spec_of(case);
        }
        let sections: BTreeSet<String> =
            spec.iter().filter_map(|id| catalogue.rule(id)).map(|r| r.section.clone()).collect();
        let cells: Vec<CellOf> = entries.iter().map(|e| CellOf::of(*e)).collect();
        let is_changed = cells.iter().any(|c| c.verdict != cells[0].verdict);
        changed += usize::from(is_changed);
        let row =
            Row { case: case.to_string(), file: first.file.clone(), cells, changed: is_changed };
        if sections.is_empty() {
            by_section.entry(UNCLASSIFIED.into()).or_default().push(row);
        } else {
            for s in sections {
                by_section.entry(s).or_default().push(row.clone());
            }
        }
    }
    let mut groups: Vec<Group> = catalogue
        .sections
        .iter()
        .filter_map(|s| {
            by_section.remove(&s.id).map(|rows| Group {
                id: s.id.clone(),
                title: s.title.clone(),
                rows,
            })
        })
        .collect();
    if let Some(rows) = by_section.remove(UNCLASSIFIED) {
        groups.push(Group {
            id: UNCLASSIFIED.into(),
            title: "naming no rule of the catalogue".into(),
            rows,
        });
    }
    Matrix { setups, groups, changed, cases: cases.len() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pass: bool, spec: &[&str]) -> Entry {
        Entry {
            file: "s.toml".into(),
            spec: spec.iter().map(|s| s.to_string()).collect(),
            pass,
            skipped: None,
            error: None,
            failed: if pass { vec![] } else { vec!["wire: expected x; actual y".into()] },
            observations: BTreeMap::new(),
            counted: Vec::new(),
            deviations: Vec::new(),
            wire: None,
        }
    }

    fn suite(kernel: &str, s: &[(&str, Entry)]) -> Suite {
        let mut setup = BTreeMap::new();
        setup.insert(
            "a".to_string(),
            [("device".to_string(), "rxe0".to_string()), ("kernel".to_string(), kernel.into())]
                .into_iter()
                .collect(),
        );
        Suite {
            setup,
            scenarios: s.iter().map(|(n, e)| (n.to_string(), e.clone())).collect(),
            ..Suite::default()
        }
    }

    fn catalogue() -> &'static Catalogue {
        Catalogue::shipped().unwrap_or_else(|e| panic!("{e}"))
    }

    fn row<'m>(m: &'m Matrix, group: &str, case: &str) -> &'m Row {
        let g = m.groups.iter().find(|g| g.id == group).unwrap_or_else(|| panic!("{m:#?}"));
        g.rows.iter().find(|r| r.case == case).unwrap_or_else(|| panic!("{m:#?}"))
    }

    fn no_spec(_: &str) -> Vec<String> {
        Vec::new()
    }

    #[test]
    fn a_case_passing_on_one_setup_and_failing_on_another_is_changed() {
        let old = suite(
            "6.1",
            &[("w", entry(true, &["psn.wrap-write"])), ("s", entry(true, &["psn.wrap-send"]))],
        );
        let new = suite(
            "6.12",
            &[("w", entry(false, &["psn.wrap-write"])), ("s", entry(true, &["psn.wrap-send"]))],
        );
        let m = build(catalogue(), &[("old".into(), old), ("new".into(), new)], &no_spec);
        let w = row(&m, "psn", "w");
        assert!(w.changed);
        assert_eq!(w.cells[0], CellOf { verdict: Cell::Pass, reason: None });
        assert_eq!(w.cells[1].verdict, Cell::Fails);
        assert_eq!(w.cells[1].reason.as_deref(), Some("wire: expected x; actual y"));
        assert!(!row(&m, "psn", "s").changed);
        assert_eq!((m.changed, m.cases), (1, 2));
        assert_eq!(m.setups[0].name, "6.1 rxe0");
    }

    #[test]
    fn skipped_carries_its_reason_and_deviations_say_which() {
        let mut skipped = entry(false, &["psn.wrap-send"]);
        skipped.skipped = Some("the device lacks ATOMIC WRITE".into());
        let mut dev = entry(true, &["psn.wrap-send"]);
        dev.observations.insert("deviation: wire of QP q from a".into(), "deviates".into());
        dev.observations.insert("deviation: memory".into(), "holds".into());
        let a = suite("6.1", &[("x", skipped), ("d", dev.clone())]);
        // A suite.json that kept what IBA says and what the device did says both.
        let mut said = dev.clone();
        said.deviations.push(Deviation {
            what: "wire of QP q from a".into(),
            iba: "NAK Invalid Request".into(),
            device: "no response".into(),
        });
        let b = suite("6.12", &[("d", said)]);
        let m = build(catalogue(), &[("a".into(), a), ("b".into(), b)], &no_spec);
        let x = row(&m, "psn", "x");
        assert_eq!(x.cells[0].verdict, Cell::Skipped);
        assert_eq!(x.cells[0].reason.as_deref(), Some("the device lacks ATOMIC WRITE"));
        assert_eq!(x.cells[1].verdict, Cell::Absent);
        assert!(x.changed);
        let d = row(&m, "psn", "d");
        assert_eq!(d.cells[0].verdict, Cell::Deviates);
        assert_eq!(d.cells[0].reason.as_deref(), Some("deviation recorded: wire of QP q from a"));
        assert_eq!(
            d.cells[1].reason.as_deref(),
            Some("wire of QP q from a: IBA: NAK Invalid Request; this device: no response")
        );
        assert!(!d.changed);
    }

    #[test]
    fn grouped_by_section_in_catalogue_order_unclassified_last() {
        let c = catalogue();
        let two = c.sections.iter().rev().find(|s| s.id != "psn").unwrap();
        let other = c.rules_of(&two.id).next().unwrap().id.clone();
        let s = suite(
            "6.1",
            &[
                ("both", entry(true, &["psn.wrap-write", &other])),
                ("none", entry(true, &[])),
                ("unknown id", entry(true, &["no.such-rule"])),
                ("old file", entry(true, &[])),
            ],
        );
        let spec_of = |case: &str| {
            if case == "old file" {
                vec!["psn.wrap-read".to_string()]
            } else {
                vec![]
            }
        };
        let m = build(c, &[("s".into(), s)], &spec_of);
        let ids: Vec<&str> = m.groups.iter().map(|g| g.id.as_str()).collect();
        let pos = |id: &str| c.sections.iter().position(|s| s.id == id).unwrap();
        assert!(pos("psn") < pos(&two.id), "catalogue order");
        assert_eq!(ids, ["psn", two.id.as_str(), UNCLASSIFIED]);
        row(&m, "psn", "both");
        row(&m, &two.id, "both");
        row(&m, "psn", "old file");
        let un: Vec<&str> = m.groups[2].rows.iter().map(|r| r.case.as_str()).collect();
        assert_eq!(un, ["none", "unknown id"]);
        assert_eq!(m.cases, 4);
    }
}
