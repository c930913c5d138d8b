//! The run report's list of cases, as a reviewer reads it: grouped by the
//! catalogue's chapter and section (a case under the section of the first rule
//! its `spec` names; one naming none under "Unclassified", last), each group
//! collapsible with its counts, a section with a failure open; filters by
//! outcome, a pass as profiled (deviating from IBA) apart from one that follows
//! IBA; and, in each case's own section, the text of the rules it checks.
//!
//! Owns: the grouping and its markup. Imports: the catalogue, the results.
use maud::{html, Markup};

use crate::catalogue::{Catalogue, Rule};
use crate::results::{Iba, Report, ScenarioResult, Status};

/// What a case came to, for the filters: `pass`, `deviates`, `fail`, `skip`.
pub(super) fn outcome_key(s: &ScenarioResult) -> &'static str {
    match (s.status, s.iba()) {
        (Status::Passed, Some(Iba::Deviates)) => "deviates",
        (Status::Passed, _) => "pass",
        (Status::Failed, _) => "fail",
        (Status::Skipped, _) => "skip",
    }
}

/// The outcomes, as the filters name them.
const OUTCOMES: [(&str, &str); 4] = [
    ("pass", "passed, following IBA"),
    ("deviates", "passed as profiled (deviating from IBA)"),
    ("fail", "failed"),
    ("skip", "skipped"),
];

/// One group of cases: its chapter, its heading, the cases (by their place in
/// the report).
struct Group {
    chapter: String,
    heading: String,
    cases: Vec<usize>,
}

/// The cases by chapter and section, in the catalogue's order.
fn groups(report: &Report, cat: Option<&Catalogue>) -> Vec<(String, Vec<Group>)> {
    let order = |id: &str| cat.and_then(|c| c.sections.iter().position(|s| s.id == id));
    let mut groups: Vec<(Option<usize>, Group)> = Vec::new();
    for (i, s) in report.scenarios.iter().enumerate() {
        let section = cat.and_then(|c| {
            s.spec.iter().find_map(|id| c.rule(id)).and_then(|r| c.section(&r.section))
        });
        let (key, chapter, heading) = match section {
            Some(sec) => (
                order(&sec.id),
                sec.chapter.clone(),
                format!("{} — {} ({})", sec.id, sec.title, sec.iba),
            ),
            None => {
                (None, "Unclassified".to_string(), "cases naming no catalogue rule".to_string())
            }
        };
        match groups.iter_mut().find(|(k, g)| *k == key && g.heading == heading) {
            Some((_, g)) => g.cases.push(i),
            None => groups.push((key, Group { chapter, heading, cases: vec![i] })),
        }
    }
    // Catalogue order; the unclassified (no place) last.
    groups.sort_by_key(|(k, _)| k.unwrap_or(usize::MAX));
    let mut chapters: Vec<(String, Vec<Group>)> = Vec::new();
    for (_, g) in groups {
        match chapters.iter_mut().find(|(c, _)| *c == g.chapter) {
            Some((_, v)) => v.push(g),
            None => chapters.push((g.chapter.clone(), vec![g])),
        }
    }
    chapters
}

/// `12 passed (2 as profiled) · 1 failed · 3 skipped`, of `cases`.
fn counts(report: &Report, cases: &[usize]) -> String {
    let of =
        |key: &str| cases.iter().filter(|&&i| outcome_key(&report.scenarios[i]) == key).count();
    let (pass, dev, fail, skip) = (of("pass"), of("deviates"), of("fail"), of("skip"));
    let mut parts = vec![match dev {
        0 => format!("{} passed", pass + dev),
        d => format!("{} passed ({d} as profiled)", pass + dev),
    }];
    if fail > 0 {
        parts.push(format!("{fail} failed"));
    }
    if skip > 0 {
        parts.push(format!("{skip} skipped"));
    }
    parts.join(" · ")
}

/// The filters and the grouped list of cases, each linking to its section.
pub(super) fn toc(report: &Report) -> Markup {
    let cat = Catalogue::shipped().ok();
    let chapters = groups(report, cat);
    html! {
        div class="filters" {
            "Show: "
            @for (key, label) in OUTCOMES {
                label class={ "filter " (key) } {
                    input type="checkbox" checked data-outcome=(key);
                    " " (label)
                }
                " "
            }
        }
        "\n"
        @for (chapter, sections) in &chapters {
            @let all: Vec<usize> = sections.iter().flat_map(|g| g.cases.iter().copied()).collect();
            details class="chapter" open {
                summary { strong { (chapter) } " — " (counts(report, &all)) }
                "\n"
                @for g in sections {
                    @let failing = g.cases.iter().any(|&i| report.scenarios[i].status == Status::Failed);
                    details class="section" open[failing] {
                        summary { (g.heading) " — " (counts(report, &g.cases)) }
                        ul class="toc" {
                            "\n"
                            @for &i in &g.cases {
                                @let s = &report.scenarios[i];
                                li data-outcome=(outcome_key(s)) { (entry(i, s, true)) }
                                "\n"
                            }
                        }
                    }
                    "\n"
                }
            }
            "\n"
        }
    }
}

/// One case in a list, linking to its section (the `i`-th of the report): its
/// name (led by its outcome's mark when `mark`), a pass as profiled marked so,
/// its file.
pub(super) fn entry(i: usize, s: &ScenarioResult, mark: bool) -> Markup {
    html! {
        a class=(super::outcome(s).0) href={ "#s" (i + 1) } {
            @if mark { (s.status.mark()) " " }
            (s.name)
        }
        @if s.iba() == Some(Iba::Deviates) {
            " " span class="deviates" title="passed as profiled: the device deviates from IBA here" { "≠ as profiled" }
        }
        " "
        span class="file" { "(" (s.file) ")" }
    }
}

/// The rules a case checks, each with its text as the catalogue gives it.
pub(super) fn rules(s: &ScenarioResult) -> Markup {
    let cat = Catalogue::shipped().ok();
    let rules: Vec<(&String, Option<&Rule>)> =
        s.spec.iter().map(|id| (id, cat.and_then(|c| c.rule(id)))).collect();
    html! {
        @if !rules.is_empty() {
            details class="rules" {
                summary { "Rules checked (" (rules.len()) ")" }
                ul {
                    @for (id, rule) in &rules {
                        li {
                            code { (id) }
                            @if let Some(r) = rule {
                                " — " (r.rule) " "
                                span class="file" {
                                    "(IBA " (r.iba)
                                    @if let Some(c) = &r.compliance { ", " (c) }
                                    ")"
                                }
                            }
                        }
                    }
                }
            }
            "\n"
        }
    }
}
