//! `roce matrix`: the case × setup grid as aligned text that fits 100 columns,
//! and as one self-contained HTML page.
//!
//! The page is a contract with `tests/browser/check_matrix.py`: one
//! `<table id="matrix">`; a `<tr class="group" data-group>` heads each section's
//! cases; each case is `<tr class="case [changed]" data-case data-group>` whose
//! `<td class="cell VERDICT" data-setup="I" title="REASON">` says the verdict of
//! setup I (0-based, the order of the `<th class="setup" data-setup>` heads).
//!
//! Owns: the grid's text and HTML. Imports: `crate::results::matrix`, maud.
use std::io::{self, Write};

use maud::{html, PreEscaped, DOCTYPE};

use crate::results::matrix::{Cell, Matrix};

/// The widest line of the text.
const WIDTH: usize = 100;
/// A cell of the text: `deviates` and a space.
const CELL: usize = 9;

/// `s` cut to `n` characters, the last an `…` when cut.
fn fit(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// What the text shows for a verdict: failures and deviations in capitals, so
/// they stand out in a column of passes.
fn word(c: Cell) -> &'static str {
    match c {
        Cell::Pass => "pass",
        Cell::Deviates => "DEVIATES",
        Cell::Skipped => "skipped",
        Cell::Fails => "FAILS",
        Cell::Absent => "-",
    }
}

/// The grid: a legend of the setups (numbered), then per section its cases, a
/// `≠` before each whose verdict changes between setups, and under a case the
/// reason of each cell that is not a pass.
pub(crate) fn text(out: &mut dyn Write, m: &Matrix) -> io::Result<()> {
    for (i, s) in m.setups.iter().enumerate() {
        writeln!(out, "{}", fit(&format!("[{}] {}  ({})", i + 1, s.name, s.suite), WIDTH))?;
    }
    writeln!(
        out,
        "{} cases, {} with a verdict that differs between setups (≠)",
        m.cases, m.changed
    )?;
    let name_w = WIDTH.saturating_sub(2 + CELL * m.setups.len()).max(20);
    let heads: String =
        (1..=m.setups.len()).map(|i| format!("{:<CELL$}", format!("[{i}]"))).collect();
    for g in &m.groups {
        writeln!(out, "\n{}", fit(&format!("{} — {}", g.id, g.title), WIDTH))?;
        writeln!(out, "  {:<name_w$}{}", "", heads.trim_end())?;
        for r in &g.rows {
            let cells: String =
                r.cells.iter().map(|c| format!("{:<CELL$}", word(c.verdict))).collect();
            let mark = if r.changed { "≠ " } else { "  " };
            writeln!(out, "{mark}{:<name_w$}{}", fit(&r.case, name_w - 1), cells.trim_end())?;
            for (i, c) in r.cells.iter().enumerate() {
                if let (Some(why), true) =
                    (&c.reason, !matches!(c.verdict, Cell::Pass | Cell::Absent))
                {
                    writeln!(
                        out,
                        "{}",
                        fit(&format!("      [{}] {}: {why}", i + 1, c.verdict.name()), WIDTH)
                    )?;
                }
            }
        }
    }
    Ok(())
}

const CSS: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
th.setup { font-weight: normal; font-size: 12px; max-width: 14em; }
tr.group th { background: #eef; text-align: left; padding-top: 8px; }
td.cell { text-align: center; cursor: default; }
td.pass { background: #e6f4e6; color: #1a5e1a; }
td.deviates { background: #fff3d6; color: #7a5200; }
td.skipped { background: #eee; color: #555; }
td.fails { background: #fbe3e3; color: #9b1111; font-weight: bold; }
td.absent { color: #999; }
tr.case.changed td.case { background: #ffe08a; font-weight: bold; }
tr.case.changed td.mark::before { content: "≠"; }
td.mark { width: 1em; color: #b35c00; font-weight: bold; border: none; }
.legend span { margin-right: 1em; }
"#;

/// The page.
pub(crate) fn html(m: &Matrix) -> String {
    let page = html! {
        (DOCTYPE) "\n"
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "roce matrix: " (m.cases) " cases × " (m.setups.len()) " setups" }
                style { (PreEscaped(CSS)) }
            }
            body {
                h1 { "roce matrix" }
                p.summary {
                    (m.cases) " cases on " (m.setups.len()) " setups; "
                    span #changed-count { (m.changed) } " with a verdict that differs between setups"
                    " (highlighted, ≠). Hover a cell for its reason."
                }
                ol.setups {
                    @for s in &m.setups {
                        li { b { (s.name) } " — " code { (s.suite) } }
                    }
                }
                table #matrix {
                    thead {
                        tr {
                            th {}
                            th { "case" }
                            @for (i, s) in m.setups.iter().enumerate() {
                                th.setup data-setup=(i) title=(s.suite) { "[" (i + 1) "] " (s.name) }
                            }
                        }
                    }
                    tbody {
                        @for g in &m.groups {
                            tr.group data-group=(g.id) {
                                th colspan=(m.setups.len() + 2) { code { (g.id) } " — " (g.title) }
                            }
                            @for r in &g.rows {
                                tr.case.changed[r.changed] data-case=(r.case) data-group=(g.id) {
                                    td.mark {}
                                    td.case title=(r.file) { (r.case) }
                                    @for (i, c) in r.cells.iter().enumerate() {
                                        td class={ "cell " (c.verdict.name()) } data-setup=(i)
                                            title=[c.reason.as_deref()] { (c.verdict.name()) }
                                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::matrix::{CellOf, Group, Row, Setup};

    fn matrix() -> Matrix {
        let long =
            "a very long case name that will not fit into the column the grid gives it at all";
        let row = |case: &str, a: Cell, b: Cell, why: Option<&str>| Row {
            case: case.into(),
            file: "s.toml".into(),
            cells: vec![
                CellOf { verdict: a, reason: None },
                CellOf { verdict: b, reason: why.map(str::to_string) },
            ],
            changed: a != b,
        };
        Matrix {
            setups: vec![
                Setup { suite: "old/suite.json".into(), name: "rxe0 6.1".into() },
                Setup { suite: "new/suite.json".into(), name: "rxe0 6.12".into() },
            ],
            groups: vec![Group {
                id: "psn".into(),
                title: "PSN <rules>".into(),
                rows: vec![
                    row(long, Cell::Pass, Cell::Fails, Some("wire: expected x; actual y")),
                    row("same", Cell::Pass, Cell::Pass, None),
                    row("skip", Cell::Skipped, Cell::Skipped, Some("no FLUSH")),
                ],
            }],
            changed: 1,
            cases: 3,
        }
    }

    #[test]
    fn text_fits_100_columns_and_marks_the_changed() {
        let mut out = Vec::new();
        text(&mut out, &matrix()).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert!(t.lines().all(|l| l.chars().count() <= WIDTH), "{t}");
        let long =
            t.lines().find(|l| l.starts_with("≠ a very long")).unwrap_or_else(|| panic!("{t}"));
        assert!(long.contains("…") && long.ends_with("pass     FAILS"), "{t}");
        assert!(t.contains("\n      [2] fails: wire: expected x; actual y\n"), "{t}");
        assert!(t.contains("\n  same"), "{t}");
        assert!(t.contains("      [2] skipped: no FLUSH"), "{t}");
    }

    #[test]
    fn html_escapes_and_titles_reasons() {
        let h = html(&matrix());
        assert!(h.contains("PSN &lt;rules&gt;"));
        assert!(h.contains(r#"<tr class="case changed" data-case="a very long"#), "{h}");
        assert!(h.contains(r#"<td class="cell fails" data-setup="1" title="wire: expected x; actual y">fails</td>"#), "{h}");
        assert!(h.contains(r#"<td class="cell pass" data-setup="0">pass</td>"#), "{h}");
        assert!(!h.contains("<script") && !h.contains("http"), "self-contained");
    }
}
