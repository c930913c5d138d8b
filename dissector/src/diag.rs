//! A mistake in text a user gave, shown the way rustc and cargo show one: what is
//! wrong, where (`path:line:col`, or where the text came from, such as `--fault #2`),
//! the text with a caret under the culprit, and what to do about it.
//!
//! Every kind of bad input — a scenario file, a fault rule, a display filter — keeps
//! its own error type with its own fields and renders through [`Report::render`], so
//! all of them look alike. The drawing is annotate-snippets' (the crate rustc and
//! cargo render with); this module only says what goes where.
//!
//! Owns: [`Report`], its [`Severity`], [`Excerpt`], [`Origin`], and [`line_col`] (a position as a
//! person counts it: lines and characters, from 1). Imports: nothing of the project.
use std::ops::Range;

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

/// Where the text came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin<'a> {
    /// A file: shown as `path:line:col`, the position taken from the excerpt (or
    /// from `line` and `col` when there is no excerpt).
    File { path: &'a str, line: usize, col: usize },
    /// An input with a name, such as `--fault #2` or `-Y`, shown as given; with an
    /// excerpt (the input itself) the renderer adds `:line:col`.
    Named(&'a str),
}

/// The text a mistake is in, and the bytes of it at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt<'a> {
    /// The text shown: the input, or the lines of a file around the mistake.
    pub text: &'a str,
    /// The number of `text`'s first line in its file (1 for a one-line input).
    pub first_line: usize,
    /// Bytes of `text` at fault. An empty span points between two characters.
    pub span: Range<usize>,
}

/// How bad a [`Report`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The input is refused.
    Error,
    /// The input is taken; something in it deserves a look.
    Warning,
}

/// One mistake, ready to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report<'a> {
    /// What is wrong, in a sentence.
    pub message: &'a str,
    pub origin: Option<Origin<'a>>,
    pub excerpt: Option<Excerpt<'a>>,
    /// What to do about it.
    pub hint: Option<&'a str>,
}

impl Report<'_> {
    /// The report as plain text, several lines, no newline at the end:
    ///
    /// ```text
    /// error: unknown field `acess`
    ///  --> t.toml:2:1
    ///   |
    /// 2 | acess = ["rw"]
    ///   | ^^^^^
    ///   |
    ///   = hint: did you mean `access`?
    /// ```
    pub fn render(&self) -> String {
        self.render_as(Severity::Error)
    }

    /// [`Report::render`], headed `warning:` for a [`Severity::Warning`].
    pub fn render_as(&self, severity: Severity) -> String {
        let level = match severity {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
        };
        let mut group = Group::with_title(level.primary_title(self.message));
        match (&self.excerpt, self.origin) {
            (Some(x), origin) => {
                let mut snippet = Snippet::source(x.text)
                    .line_start(x.first_line)
                    .annotation(AnnotationKind::Primary.span(clamp(x.text, x.span.clone())));
                // The renderer adds the excerpt's line and column to the origin.
                match origin {
                    Some(Origin::File { path, .. } | Origin::Named(path)) => {
                        snippet = snippet.path(path)
                    }
                    None => {}
                }
                group = group.element(snippet);
            }
            (None, Some(Origin::File { path, line, col })) => {
                group = group
                    .element(annotate_snippets::Origin::path(path).line(line).char_column(col));
            }
            (None, Some(Origin::Named(name))) => {
                group = group.element(annotate_snippets::Origin::path(name));
            }
            (None, None) => {}
        }
        if let Some(h) = self.hint {
            group = group.element(Level::HELP.with_name("hint").message(h));
        }
        Renderer::plain().render(&[group])
    }
}

/// `span` moved onto character boundaries of `text` and inside it.
fn clamp(text: &str, span: Range<usize>) -> Range<usize> {
    let floor = |mut i: usize| {
        i = i.min(text.len());
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let end = floor(span.end);
    floor(span.start).min(end)..end
}

/// Line and column of byte `offset` in `text`, both from 1, the column in
/// characters (an `é` is one column, not two). An offset inside a character is
/// that character's; one past the end is the end.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = clamp(text, offset..offset).start;
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "name = \"x\"\nacess = [\"é\", 1]\n";

    fn at(span: Range<usize>) -> String {
        let (line, col) = line_col(FILE, span.start);
        Report {
            message: "m",
            origin: Some(Origin::File { path: "t.toml", line, col }),
            excerpt: Some(Excerpt { text: FILE, first_line: 1, span }),
            hint: None,
        }
        .render()
    }

    #[test]
    fn a_report_says_what_where_and_what_to_do() {
        let line = FILE.lines().nth(1).unwrap_or_default();
        let r = Report {
            message: "unknown field `acess`",
            origin: Some(Origin::File { path: "t.toml", line: 2, col: 1 }),
            excerpt: Some(Excerpt { text: line, first_line: 2, span: 0..5 }),
            hint: Some("did you mean `access`?"),
        };
        assert_eq!(
            r.render(),
            "error: unknown field `acess`\n --> t.toml:2:1\n  |\n2 | acess = [\"é\", 1]\n  | ^^^^^\n  |\n  = hint: did you mean `access`?"
        );
        let r = Report {
            message: "unknown key `bogus`",
            origin: Some(Origin::Named("--fault #2")),
            excerpt: Some(Excerpt { text: "drop qp=1 bogus=2", first_line: 1, span: 10..15 }),
            hint: None,
        };
        assert_eq!(
            r.render(),
            "error: unknown key `bogus`\n --> --fault #2:1:11\n  |\n1 | drop qp=1 bogus=2\n  |           ^^^^^"
        );
        // Without an excerpt, the origin alone; without an origin, the excerpt alone.
        let r = Report {
            message: "missing `action`",
            origin: Some(Origin::Named("f.toml:4:1 (rule #2)")),
            excerpt: None,
            hint: Some("actions are drop, ce"),
        };
        assert_eq!(
            r.render(),
            "error: missing `action`\n--> f.toml:4:1 (rule #2)\n = hint: actions are drop, ce"
        );
        let r = Report {
            message: "cannot read it",
            origin: Some(Origin::File { path: "t.toml", line: 1, col: 1 }),
            excerpt: None,
            hint: None,
        };
        assert_eq!(r.render(), "error: cannot read it\n--> t.toml:1:1");
        let r = Report {
            message: "the filter ends too soon",
            origin: None,
            excerpt: Some(Excerpt { text: "a ==", first_line: 1, span: 4..4 }),
            hint: None,
        };
        assert_eq!(r.render(), "error: the filter ends too soon\n  |\n1 | a ==\n  |     ^");
    }

    /// Columns count characters: the `é` before them is one column, not two.
    #[test]
    fn columns_count_characters_not_bytes() {
        // `"` after the `é` (bytes 21..23) is byte 23, character 12 of line 2.
        assert_eq!(line_col(FILE, 23), (2, 12));
        assert!(at(23..24).contains(" --> t.toml:2:12\n"), "{}", at(23..24));
        assert!(at(23..24).ends_with("\n  |            ^"), "{}", at(23..24));
        // A span inside a character is that character's.
        assert_eq!(line_col(FILE, 22), (2, 11));
        assert!(at(22..23).contains(" --> t.toml:2:11\n"), "{}", at(22..23));
        assert_eq!(line_col(FILE, 0), (1, 1));
        assert_eq!(line_col(FILE, 999), (3, 1));
        // Out of range is clamped, not a panic.
        assert!(at(30..99).contains("t.toml:"), "{}", at(30..99));
    }
}
