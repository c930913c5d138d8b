//! What changed between two suite runs, for the terminal (`roce diff`, `roce suite
//! --baseline`).
//!
//! Owns: [`diff`]'s text. Imports: nothing of the crate: the changes come as lines from
//! `results::suite::diff`.
use std::io::{self, Write};
use std::path::Path;

/// `compared with BASE: nothing changed`, or a line per change.
pub(crate) fn diff(out: &mut dyn Write, base: &Path, changes: &[String]) -> io::Result<()> {
    if changes.is_empty() {
        return writeln!(out, "compared with {}: nothing changed", base.display());
    }
    writeln!(out, "compared with {}:", base.display())?;
    for c in changes {
        writeln!(out, "  {c}")?;
    }
    Ok(())
}
