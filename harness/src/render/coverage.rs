//! `roce coverage` for the terminal and as a page: the tally of
//! `crate::results::coverage` as text, and as one self-contained HTML page.
//!
//! Owns: coverage's text and HTML. Imports: `crate::results::coverage`,
//! `crate::catalogue` (its path and the rules' statements), maud.
use std::io::Write;

use maud::{html, PreEscaped, DOCTYPE};

use crate::catalogue::{Catalogue, WaitsOn};
use crate::results::coverage::{percent, Coverage, Verdict};

pub(crate) fn text(out: &mut dyn Write, c: &Coverage, from: &str) -> std::io::Result<()> {
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
    // What each rule not covered yet waits on, as the catalogue says.
    let groups = [Some(WaitsOn::Format), Some(WaitsOn::Device), Some(WaitsOn::Scenario), None];
    for on in groups {
        let these: Vec<_> = c.waiting.iter().filter(|w| w.on == on).collect();
        if these.is_empty() {
            continue;
        }
        let heading = on.map_or("nothing the catalogue says", WaitsOn::heading);
        writeln!(out, "not covered, waiting on {heading} ({}):", these.len())?;
        for w in these {
            match w.why {
                Some(why) => writeln!(out, "  {}: {why}", w.id)?,
                None => writeln!(out, "  {}", w.id)?,
            }
        }
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

const CSS: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1em; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; }
.bar { display: inline-block; height: 0.8em; background: #4a9a4a; }
ul.uncovered { margin: 0.2em 0; padding-left: 1.2em; font-size: 13px; }
td.holds { background: #e6f4e6; } td.deviates { background: #fff3d6; }
td.skipped { background: #eee; } td.fails { background: #fbe3e3; font-weight: bold; }
td.not-run { color: #999; }
"#;

/// The page: per chapter and section the counts, the covered share and the rules
/// not covered with what each says; with suites, per setup the count of each
/// verdict and, per rule that does not plainly hold, its verdict (reasons on hover).
pub(crate) fn html(c: &Coverage, catalogue: &Catalogue) -> String {
    let statement = |id: &str| catalogue.rule(id).map_or("", |r| r.rule.as_str());
    let order =
        [Verdict::Holds, Verdict::Deviates, Verdict::Skipped, Verdict::Fails, Verdict::NotRun];
    let page = html! {
        (DOCTYPE) "\n"
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "roce coverage: " (c.total.covered) " of " (c.total.observable) " rules" }
                style { (PreEscaped(CSS)) }
            }
            body {
                h1 { "Conformance coverage" }
                p #total {
                    (c.rules) " rules in " code { (crate::catalogue::PATH) } ", " (c.observable)
                    " observable; " (c.scenarios) " scenarios. Covered: " b { (c.total.covered) " of "
                    (c.total.observable) " (" (c.total.percent) " %)" }
                }
                @for ch in &c.chapters {
                    h2 { (ch.chapter) ": " (ch.covered) " of " (ch.observable) " ("
                        (percent(ch.covered, ch.observable)) " %)" }
                    table.sections {
                        tr { th { "section" } th { "IBA" } th { "rules" } th { "covered" } th { "%" } th { "not covered" } }
                        @for s in &ch.sections {
                            @let p = percent(s.covered, s.observable);
                            tr data-section=(s.id) {
                                td { code { (s.id) } " " (s.title) }
                                td { (s.iba) }
                                td.num { (s.observable) }
                                td.num { (s.covered) }
                                td.num { (p) " " span.bar style={ "width:" (p / 2.0) "px" } {} }
                                td {
                                    @if !s.uncovered.is_empty() {
                                        ul.uncovered {
                                            @for id in &s.uncovered {
                                                li { code { (id) } ": " (statement(id)) }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                h2 { "Not observable (" (c.not_observable.len()) ", not counted)" }
                ul { @for n in &c.not_observable { li { code { (n.id) } ": " (n.reason) } } }
                @for s in &c.setups {
                    h2 { "Setup " (s.setup) }
                    p { code { (s.suite) } }
                    table.counts {
                        tr { @for v in order { th { (v.name()) } } }
                        tr { @for v in order { td.num class=(css(v)) { (s.counts.get(&v).copied().unwrap_or(0)) } } }
                    }
                    table.rules {
                        tr { th { "rule" } th { "verdict" } th { "scenarios" } }
                        @for v in [Verdict::Fails, Verdict::Deviates, Verdict::Skipped] {
                            @for (id, r) in s.rules.iter().filter(|(_, r)| r.verdict == v) {
                                tr {
                                    td title=(statement(id)) { code { (id) } }
                                    td class=(css(v)) title=(r.reasons.join("\n")) { (v.name()) }
                                    td { @for (f, x) in &r.scenarios { (f) " (" (x.name()) ") " } }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    page.into_string()
}

fn css(v: Verdict) -> &'static str {
    match v {
        Verdict::NotRun => "not-run",
        v => v.name(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::results::coverage::{tally, Naming};
    use crate::results::suite::{Entry, Suite};

    #[test]
    fn the_page_has_the_sections_the_uncovered_rules_and_each_setup() {
        let c = Catalogue::shipped().unwrap_or_else(|e| panic!("{e}"));
        let mut naming: Naming = BTreeMap::new();
        naming.insert("psn.wrap-write", vec![("s".into(), "s.toml".into())]);
        let mut suite = Suite::default();
        let e = Entry {
            file: "s.toml".into(),
            spec: vec![],
            pass: false,
            skipped: Some("no <FLUSH>".into()),
            error: None,
            failed: vec![],
            observations: BTreeMap::new(),
            counted: Vec::new(),
            deviations: Vec::new(),
            wire: None,
        };
        suite.scenarios.insert("s".into(), e);
        let t = tally(c, &naming, 1, &[(PathBuf::from("x/suite.json"), suite)]);
        let h = html(&t, c);
        assert!(h.contains(r#"<tr data-section="psn">"#), "{h}");
        let send = c.rule("psn.wrap-send").unwrap();
        assert!(h.contains(&format!(
            "<li><code>psn.wrap-send</code>: {}",
            maud::html! { (send.rule) }.into_string()
        )));
        assert!(!h.contains("<li><code>psn.wrap-write</code>"), "covered is not listed");
        assert!(
            h.contains("Setup x/suite.json")
                && h.contains(r#"title="s.toml: no &lt;FLUSH&gt;">skipped</td>"#),
            "{h}"
        );
        assert!(!h.contains("<script"));
    }
}
