//! A problem in a scenario file, said the way rustc says it: `file:line:col`, the
//! line, a caret under the span, and a hint.
//!
//! Owns: [`Diagnostic`] and its [`Severity`], its [`Source`] and the hints for serde's messages. Imports:
//! dissector's `did_you_mean`; nothing else of the project.
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// How bad a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Severity {
    /// The file is refused.
    Error,
    /// The file loads; something in it deserves a look (`roce check` says so).
    Warning,
}

/// One problem in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Diagnostic {
    pub(crate) severity: Severity,
    pub(crate) file: PathBuf,
    pub(crate) line: usize,
    pub(crate) col: usize,
    pub(crate) message: String,
    /// The offending source line and a caret under the span.
    pub(crate) excerpt: Option<String>,
    pub(crate) hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{}:{}:{}: {what}: {}", self.file.display(), self.line, self.col, self.message)?;
        if let Some(x) = &self.excerpt {
            write!(f, "\n{x}")?;
        }
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

/// A file's text, to turn byte spans into positions and excerpts.
pub(crate) struct Source<'a> {
    pub(crate) file: &'a Path,
    pub(crate) text: &'a str,
}

impl Source<'_> {
    /// Line and column (1-based, in characters) of a byte offset.
    fn position(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        (line, self.text[start..offset].chars().count() + 1)
    }

    /// A diagnostic at `span` (the file's start when there is none).
    pub(crate) fn diag(
        &self,
        span: Option<Range<usize>>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> Diagnostic {
        let span = span.unwrap_or(0..0);
        let (line, col) = self.position(span.start);
        let excerpt = self.text.lines().nth(line - 1).map(|l| {
            let width = self
                .text
                .get(span.clone())
                .and_then(|s| s.lines().next())
                .map(|s| s.chars().count())
                .unwrap_or(1)
                .max(1);
            let room = l.chars().count().saturating_sub(col - 1).max(1);
            format!("  {l}\n  {}{}", " ".repeat(col - 1), "^".repeat(width.min(room)))
        });
        Diagnostic {
            severity: Severity::Error,
            file: self.file.to_path_buf(),
            line,
            col,
            message: message.into(),
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
        let s = Source { file: Path::new("t.toml"), text };
        let d =
            s.diag(Some(11..16), "unknown field `acess`", Some("did you mean `access`?".into()));
        assert_eq!((d.line, d.col), (2, 1));
        assert_eq!(d.to_string(), "t.toml:2:1: error: unknown field `acess`\n  acess = [\"é\", 1]\n  ^^^^^\n  hint: did you mean `access`?");
        // A column counts characters, not bytes; a span inside a character is moved back.
        assert_eq!(s.diag(Some(23..24), "x", None).col, 12);
        assert_eq!(s.diag(Some(22..23), "x", None).col, 11);
        assert_eq!(s.diag(None, "x", None).line, 1);
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
