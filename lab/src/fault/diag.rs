//! A fault rule that does not parse: the message, where the rule came from, the
//! rule with a caret under the offending word, and a hint, drawn by
//! `dissector::diag` as every mistake in text a user gave is.
//!
//! Owns: [`RuleError`] and how it is shown. Imports: nothing from the crate
//! ([`parse`](super::parse) makes these errors).
use std::fmt;
use std::ops::Range;

use dissector::diag::{Excerpt, Origin, Report};

/// A rule that does not parse: what is wrong, and where in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// The whole rule as given.
    pub input: String,
    /// Byte range of the offending token in `input`.
    pub span: Range<usize>,
    pub message: String,
    pub hint: Option<String>,
    /// Where the rule came from (`--fault #2`, `faults.toml:7:1 (rule #2)`). With
    /// `input`, the input itself: its `:line:col` is added when shown.
    pub origin: Option<String>,
}

/// Through [`dissector::diag::Report`], as every mistake in text a user gave:
///
/// ```text
/// error: unknown key `bogus`
///  --> --fault #2:1:11
///   |
/// 1 | drop qp=1 bogus=2
///   |           ^^^^^
///   |
///   = hint: keys are dir, qp, op, …
/// ```
///
/// A rule with no text of its own (a rule file that cannot be read, a `[[rule]]`
/// table without an `action`) shows only its origin.
impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let excerpt = (!self.input.is_empty()).then(|| Excerpt {
            text: &self.input,
            first_line: 1,
            span: self.span.clone(),
        });
        let report = Report {
            message: &self.message,
            origin: self.origin.as_deref().map(Origin::Named),
            excerpt,
            hint: self.hint.as_deref(),
        };
        f.write_str(&report.render())
    }
}

impl std::error::Error for RuleError {}
