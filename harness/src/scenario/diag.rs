//! A problem in a scenario file, said the way rustc says it, through
//! `dissector::diag` as every mistake in text a user gave is: what, ` --> file:line:col`,
//! the line with a caret under the span, and a hint.
//!
//! Owns: [`Diagnostic`], its [`Source`], the [`SpanMap`] from a case's text back to
//! its file (which [`super::cases`] makes), the [`Parts`] of a scenario composed
//! with its fixtures (which [`super::fixtures`] makes) and the hints for serde's
//! messages.
//! Imports: dissector's `did_you_mean` and `diag` (with its [`Severity`]); nothing
//! else of the project.
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

pub(crate) use dissector::diag::Severity;
use dissector::diag::{line_col, Excerpt, Origin, Report};

/// One problem in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Diagnostic {
    pub(crate) severity: Severity,
    pub(crate) file: PathBuf,
    /// Line and column (1-based, in characters) where the problem starts.
    pub(crate) line: usize,
    pub(crate) col: usize,
    pub(crate) message: String,
    /// The offending source line, and the bytes of it the problem is about.
    pub(crate) excerpt: Option<(String, Range<usize>)>,
    pub(crate) hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.file.display().to_string();
        let report = Report {
            message: &self.message,
            origin: Some(Origin::File { path: &path, line: self.line, col: self.col }),
            excerpt: self.excerpt.as_ref().map(|(text, span)| Excerpt {
                text,
                first_line: self.line,
                span: span.clone(),
            }),
            hint: self.hint.as_deref(),
        };
        f.write_str(&report.render_as(self.severity))
    }
}

/// Replaced ranges: the file's range and the range of the expanded text that took
/// its place, in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct SpanMap {
    pub(crate) edits: Vec<(Range<usize>, Range<usize>)>,
}

impl SpanMap {
    /// The file's span for a span of the expanded text: a span reaching into a
    /// substituted value covers the placeholder's literal.
    pub(crate) fn to_file(&self, span: Range<usize>) -> Range<usize> {
        let start = self.pos(span.start, false);
        let end = self.pos(span.end, true).max(start);
        start..end
    }

    fn pos(&self, p: usize, end: bool) -> usize {
        let mut delta: isize = 0;
        for (orig, new) in &self.edits {
            if p < new.start || (end && p == new.start) {
                break;
            }
            if p < new.end || (end && p == new.end) {
                return if end { orig.end } else { orig.start };
            }
            delta = new.end as isize - orig.end as isize;
        }
        (p as isize - delta).max(0) as usize
    }

    /// The expanded text's position for a position of the file outside any edit.
    pub(crate) fn to_text(&self, p: usize) -> usize {
        let mut delta: isize = 0;
        for (orig, new) in &self.edits {
            if p < orig.start {
                break;
            }
            delta = new.end as isize - orig.end as isize;
        }
        (p as isize + delta).max(0) as usize
    }
}

/// A scenario's text composed with the fixtures it uses: which file each byte
/// of the composed text came from, to show a problem where it was written.
#[derive(Debug, Clone)]
pub(crate) struct Parts {
    /// The scenario that uses the fixtures.
    pub(crate) user: PathBuf,
    /// Each file as written: the scenario first, then its fixtures.
    pub(crate) files: Vec<(PathBuf, String)>,
    /// In the composed text's order: where a piece starts in it, the file it is
    /// from, and its range in that file.
    pub(crate) pieces: Vec<(usize, usize, Range<usize>)>,
}

impl Parts {
    /// The file, its text and the span in it for a span of the composed text;
    /// whether that file is a fixture.
    fn locate(&self, span: Range<usize>) -> (&Path, &str, Range<usize>, bool) {
        let i = self.pieces.partition_point(|(at, _, _)| *at <= span.start).saturating_sub(1);
        let Some((at, file, range)) = self.pieces.get(i) else {
            let (path, text) = &self.files[0];
            return (path, text, 0..0, false);
        };
        let start = (range.start + span.start.saturating_sub(*at)).min(range.end);
        let end = (range.start + span.end.saturating_sub(*at)).clamp(start, range.end);
        let (path, text) = &self.files[*file];
        (path, text, start..end, *file != 0)
    }
}

/// A file's text, to turn byte spans into positions and excerpts.
pub(crate) struct Source<'a> {
    pub(crate) file: &'a Path,
    pub(crate) text: &'a str,
    /// For a case of a parameterised file: spans are of the case's text, mapped
    /// back to the file's (`text`) before they are shown.
    pub(crate) map: Option<&'a SpanMap>,
    /// For a scenario that uses fixtures: `text` is composed of several files,
    /// and a span is shown in the one it falls in.
    pub(crate) parts: Option<&'a Parts>,
}

impl<'a> Source<'a> {
    /// The file's own text, its spans as they are.
    pub(crate) fn new(file: &'a Path, text: &'a str) -> Source<'a> {
        Source { file, text, map: None, parts: None }
    }

    /// A diagnostic at `span` (the file's start when there is none). A span over
    /// several lines is shown on its first.
    pub(crate) fn diag(
        &self,
        span: Option<Range<usize>>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> Diagnostic {
        let span = span.unwrap_or(0..0);
        let span = match self.map {
            Some(m) => m.to_file(span),
            None => span,
        };
        let (file, text, span, fixture) = match self.parts {
            Some(p) => p.locate(span),
            None => (self.file, self.text, span, false),
        };
        let mut message = message.into();
        if let Some(p) = self.parts.filter(|_| fixture) {
            message = format!("{message} (in a fixture {} uses)", p.user.display());
        }
        let (line, col) = line_col(text, span.start);
        let excerpt = text.lines().nth(line - 1).map(|l| {
            // The line's first byte.
            let start = match line {
                1 => 0,
                n => text.match_indices('\n').nth(n - 2).map_or(0, |(i, _)| i + 1),
            };
            let from = l.char_indices().nth(col - 1).map_or(l.len(), |(i, _)| i);
            let to = span.end.saturating_sub(start).clamp(from, l.len());
            (l.to_string(), from..to)
        });
        Diagnostic {
            severity: Severity::Error,
            file: file.to_path_buf(),
            line,
            col,
            message,
            excerpt,
            hint,
        }
    }
}

/// The hint for a serde message such as "unknown field `acess`, expected one of
/// `a`, `b`": the closest name, or the list.
pub(crate) fn serde_hint(message: &str) -> Option<String> {
    let unknown = message.split('`').nth(1)?;
    let (_, expected) = message.split_once("expected")?;
    let names: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    if message.starts_with("unknown field") || message.starts_with("unknown variant") {
        return Some(match dissector::text::did_you_mean(unknown, names.iter().copied()) {
            Some(m) => format!("did you mean `{m}`?"),
            None => format!("expected one of: {}", names.join(", ")),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_excerpts_and_hints() {
        let text = "name = \"x\"\nacess = [\"é\", 1]\n";
        let s = Source::new(Path::new("t.toml"), text);
        let d =
            s.diag(Some(11..16), "unknown field `acess`", Some("did you mean `access`?".into()));
        assert_eq!((d.line, d.col), (2, 1));
        assert_eq!(
            d.to_string(),
            "error: unknown field `acess`\n --> t.toml:2:1\n  |\n2 | acess = [\"é\", 1]\n  | ^^^^^\n  |\n  = hint: did you mean `access`?"
        );
        // A column counts characters, not bytes; a span inside a character is moved
        // back; the caret is under the same character the column names.
        let d = s.diag(Some(23..24), "x", None);
        assert_eq!(d.col, 12);
        assert_eq!(
            d.to_string(),
            "error: x\n --> t.toml:2:12\n  |\n2 | acess = [\"é\", 1]\n  |            ^"
        );
        let d = s.diag(Some(22..23), "x", None);
        assert_eq!(d.col, 11);
        assert!(d.to_string().ends_with("\n  |           ^"), "{d}");
        assert_eq!(s.diag(None, "x", None).line, 1);
        // A span over two lines is shown on its first; one past the end still shows.
        assert!(s
            .diag(Some(6..14), "x", None)
            .to_string()
            .ends_with("\n1 | name = \"x\"\n  |       ^^^^"));
        assert!(s.diag(Some(29..29), "x", None).to_string().contains("--> t.toml:3:1"));
        assert_eq!(
            serde_hint("unknown field `acess`, expected one of `access`, `name`").as_deref(),
            Some("did you mean `access`?")
        );
        assert_eq!(
            serde_hint("unknown variant `zzzzz`, expected `rc` or `uc`").as_deref(),
            Some("expected one of: rc, uc")
        );
        assert_eq!(serde_hint("missing field `on`"), None);
    }
}
