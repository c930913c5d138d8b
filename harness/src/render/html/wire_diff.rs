//! A changed wire as two ladders side by side: the one kept (left) and this
//! run's (right), row against row, only where they differ (three lines of
//! context around each change), each part headed by the QP and list it is in.
//! A frame is an arrow between two lanes, from its sender to its receiver; a
//! line taken out is shaded red on the left, one put in green on the right.
//!
//! Drawn with HTML and CSS (a row's lanes are its cell's borders), so a long
//! change wraps and scrolls as text does; the markup is `table.wire-diff`, each
//! row `tr.equal|delete|insert|replace` of `td.kept` and `td.now`, each arrow
//! `div.rung.ltr|rtl` with `data-from` and `data-to`.
//!
//! Owns: [`before_after`]. Imports: the normal form read back
//! ([`crate::judge::snapshot::read`]), `similar`, maud.
use maud::{html, Markup};
use similar::{DiffOp, TextDiff};

use crate::judge::snapshot::read::{read, Line};

/// At most this many rows are drawn; the rest are counted (the unified diff
/// in the expectations table and the `.wire.new` file have them all).
const MAX_ROWS: usize = 400;

/// The ladders of wire `kept` and wire `now`, where they differ.
pub(super) fn before_after(kept: &str, now: &str) -> Markup {
    let (old, new) = (read(kept), read(now));
    // Hosts in the order first seen: an arrow to a later one points right.
    let mut hosts: Vec<&str> = Vec::new();
    for l in old.iter().chain(&new) {
        if let Line::Frame { from, to, .. } = l {
            for h in [from, to] {
                if !hosts.contains(h) {
                    hosts.push(h);
                }
            }
        }
    }
    let order = |h: &str| hosts.iter().position(|x| *x == h).unwrap_or(usize::MAX);
    let (old_at, new_at) = (context(&old), context(&new));
    // The rows to draw: a heading before each group of changes, then its rows.
    let mut drawn: Vec<Row> = Vec::new();
    let mut left_out = 0usize;
    for group in TextDiff::from_lines(kept, now).grouped_ops(3) {
        let (o, n) = first_of(&group);
        let at = new_at.get(n).or_else(|| old_at.get(o)).copied().unwrap_or_default();
        // A group that starts at its section's own line needs no heading.
        let at_section = matches!(new.get(n).or_else(|| old.get(o)), Some(Line::Section(_)));
        if drawn.len() < MAX_ROWS && !at_section {
            drawn.push(Row::Where(at));
        }
        for row in group.iter().flat_map(rows_of) {
            if drawn.len() < MAX_ROWS {
                drawn.push(row);
            } else {
                left_out += 1;
            }
        }
    }
    let cell = |l: Option<&Line<'_>>| -> Markup {
        match l {
            None | Some(Line::Comment("")) => html! {},
            Some(Line::Comment(t)) => html! { div class="comment" { (t) } },
            Some(Line::Section(t)) => html! { div class="section" { (t) } },
            Some(Line::Part(t)) => html! { div class="part" { (t) } },
            Some(Line::Fold(t)) => html! { div class="fold" { (t) } },
            Some(Line::Frame { from, to, text }) => {
                let dir = if order(from) <= order(to) { "ltr" } else { "rtl" };
                html! {
                    div class={ "rung " (dir) } data-from=(from) data-to=(to)
                        title={ (from) " → " (to) ": " (text) } {
                        span class="label" { (squeeze(text)) }
                        span class="shaft" {}
                    }
                }
            }
        }
    };
    html! {
        div class="wire-diff-wrap" {
            h3 { "Wire changed: the ladder kept, and this run's" }
            "\n"
            p class="note" {
                "Only where the two differ, with three lines around each change. "
                "A frame is an arrow from its sender's lane to its receiver's; red: only in the "
                "snapshot kept, green: only in this run's."
            }
            table class="wire-diff" {
                thead {
                    tr { th { "kept" } th { "this run" } }
                    @if let [first, second, ..] = hosts[..] {
                        tr class="lanes" {
                            @for _ in 0..2 {
                                td { div { span { (first) } span { (second) } } }
                            }
                        }
                    }
                }
                tbody {
                    "\n"
                    @for row in &drawn {
                        @match row {
                            Row::Where((section, part)) => tr class="where" {
                                td colspan="2" {
                                    (section.unwrap_or("the snapshot's head"))
                                    @if let Some(p) = part { " · " (p) }
                                }
                            },
                            Row::Pair(class, l, r) => tr class=(class) {
                                td class="kept" { (cell(l.and_then(|i| old.get(i)))) }
                                td class="now" { (cell(r.and_then(|i| new.get(i)))) }
                            },
                        }
                        "\n"
                    }
                }
            }
            @if left_out > 0 {
                p class="note" {
                    (left_out) " more rows left out: the unified diff above has them all."
                }
            }
        }
        "\n"
    }
}

/// A row of the drawing.
enum Row<'a> {
    /// Where the next changes are: the section and the list.
    Where(Where<'a>),
    /// Its class (`equal`, `delete`, `insert`, `replace`), and the kept and new
    /// line it shows.
    Pair(&'static str, Option<usize>, Option<usize>),
}

/// A section (`qp q a → b`), and the list in it (`requests`).
type Where<'a> = (Option<&'a str>, Option<&'a str>);

/// For each line, the section and list it is in.
fn context<'a>(lines: &[Line<'a>]) -> Vec<Where<'a>> {
    let mut at: Where<'a> = (None, None);
    lines
        .iter()
        .map(|l| {
            match *l {
                Line::Section(s) => at = (Some(s), None),
                Line::Part(p) => at.1 = Some(p),
                _ => {}
            }
            at
        })
        .collect()
}

/// The first line each side of a group of changes starts at.
fn first_of(group: &[DiffOp]) -> (usize, usize) {
    group.first().map_or((0, 0), |op| {
        let (_, o, n) = op.as_tag_tuple();
        (o.start, n.start)
    })
}

/// The rows of one operation: its class, and the kept and new line each shows.
fn rows_of(op: &DiffOp) -> Vec<Row<'static>> {
    let (tag, o, n) = op.as_tag_tuple();
    let class = match tag {
        similar::DiffTag::Equal => "equal",
        similar::DiffTag::Delete => "delete",
        similar::DiffTag::Insert => "insert",
        similar::DiffTag::Replace => "replace",
    };
    let len = o.len().max(n.len());
    (0..len)
        .map(|k| {
            let l = (k < o.len()).then_some(o.start + k);
            let r = (k < n.len()).then_some(n.start + k);
            // A replacement longer on one side: its extra rows are one-sided.
            let class = match (l, r) {
                (Some(_), None) => "delete",
                (None, Some(_)) => "insert",
                _ => class,
            };
            Row::Pair(class, l, r)
        })
        .collect()
}

/// A frame's line with its column padding folded to one space.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
