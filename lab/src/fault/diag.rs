//! A fault rule that does not parse, shown rustc-style: the message, the rule, and
//! a caret under the offending word ([`RuleError`]). Imports nothing from the
//! crate; [`parse`](super::parse) makes these errors.
use std::fmt;
use std::ops::Range;

/// A rule that does not parse: what is wrong, and where in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// The whole rule as given.
    pub input: String,
    /// Byte range of the offending token in `input`.
    pub span: Range<usize>,
    pub message: String,
    pub hint: Option<String>,
    /// Where the rule came from (`--fault #2`, `faults.toml:7:1`).
    pub origin: Option<String>,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Some(o) => writeln!(f, "bad fault rule ({o}): {}", self.message)?,
            None => writeln!(f, "bad fault rule: {}", self.message)?,
        }
        writeln!(f, "    {}", self.input)?;
        let col = self.input[..self.span.start.min(self.input.len())].chars().count();
        let width =
            self.input.get(self.span.clone()).map(|s| s.chars().count()).unwrap_or(1).max(1);
        write!(f, "    {}{}", " ".repeat(col), "^".repeat(width))?;
        if let Some(h) = &self.hint {
            write!(f, "\nhint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RuleError {}
