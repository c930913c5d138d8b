//! The pure half of `roce check --fix`: a scenario's text in the current format,
//! when the fix can mend it and the fixed text loads to the same scenario; else
//! every problem it has. Nothing is read or written here: the command
//! (`crate::cli`'s `check --fix`) reads the file, and writes what this returns.
//!
//! Owns: [`Plan`] and [`plan`]. Imports: [`super::check`] (loading the text before
//! and after), [`super::legacy`] (reading the older format and the rewrite),
//! [`super::diag`]; `toml` for the syntax check.
use std::path::Path;

use super::check;
use super::diag::{Diagnostic, Severity, Source};
use super::legacy::{self, CURRENT};
use super::Scenario;

/// What fixing one file comes to.
#[derive(Debug)]
pub(crate) enum Plan {
    /// In the current form already.
    Current,
    /// The new text, the format it was in, and what changes (one line each).
    Fixed { text: String, was: u32, changes: Vec<String> },
}

/// A problem of the file as a whole (no line or column).
pub(crate) fn problem(f: &Path, message: String) -> Diagnostic {
    let mut d = Source::new(f, "").diag(None, message, None);
    d.severity = Severity::Error;
    d
}

/// The checked scenarios, their warnings left out: what a run carries out.
fn model(all: &[Scenario]) -> String {
    let all: Vec<Scenario> = all
        .iter()
        .cloned()
        .map(|mut s| {
            s.warnings.clear();
            s
        })
        .collect();
    format!("{all:?}")
}

/// The file `f` (its text `text`) in the current form, when it loads (what its
/// format dropped aside: that is what the fix removes); else every problem it has.
pub(crate) fn plan(f: &Path, text: &str) -> Result<Plan, Vec<Diagnostic>> {
    let src = Source::new(f, text);
    if let Err(e) = text.parse::<toml::Table>() {
        return Err(vec![src.diag(e.span(), format!("TOML syntax: {}", e.message().trim()), None)]);
    }
    let l = legacy::read(&src)?;
    let before = check::parse_cases(f, text);
    if let Err(all) = &before {
        let left: Vec<Diagnostic> = all.iter().filter(|d| !l.errors.contains(d)).cloned().collect();
        if !left.is_empty() {
            return Err(left);
        }
    }
    if l.is_current() {
        return Ok(Plan::Current);
    }
    let new = legacy::fix(text, &l);
    // The fixed text must be in the current form and load as the file did.
    let wrong = |why: String| {
        vec![problem(f, format!("roce check --fix: {why}; the file was not changed (a defect of roce: please report it with the file)"))]
    };
    let again = legacy::read(&Source::new(f, &new))
        .map_err(|_| wrong("the fixed text's `format` would not read".into()))?;
    if !again.is_current() || !again.warnings.is_empty() {
        return Err(wrong("the fixed text is still not in the current format".into()));
    }
    let after = check::parse_cases(f, &new).map_err(|d| {
        wrong(format!(
            "the fixed text would not load ({})",
            d.first().map_or("", |d| d.message.as_str())
        ))
    })?;
    if let Ok(before) = &before {
        if model(before) != model(&after) {
            return Err(wrong("the fixed text would load to another scenario".into()));
        }
    }
    let changes = l
        .warnings
        .iter()
        .chain(&l.errors)
        .map(|d| {
            let what = d.message.split(": ").next().unwrap_or(&d.message);
            let done = if what.starts_with("`${`") { "written `$${`" } else { "removed" };
            format!("{}:{}  {what}: {done}", d.line, d.col)
        })
        .chain(std::iter::once(format!("format = {CURRENT}")))
        .collect();
    Ok(Plan::Fixed { text: new, was: l.format, changes })
}
