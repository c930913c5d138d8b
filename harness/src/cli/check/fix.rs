//! `roce check --fix`: each scenario file rewritten in the current format, its
//! comments and layout kept; `--dry-run` prints the unified diff instead.
//!
//! A file is written only when the fixed text loads without a warning about its
//! format and to the same checked scenario as the file did: else, and when the
//! file has problems the fix cannot mend, it is left as it is and the command
//! ends with exit 2. The new text goes to a file beside the old one, which is
//! renamed over it: a file is never half written.
//!
//! Owns: `--fix` and `--dry-run`: reading each file, writing the fixed text
//! whole, the diff. Imports: `crate::scenario` (discovery, and [`plan`], the
//! fix itself as a pure function), `super::super::exit`; `similar` for the diff.
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::super::exit::{CommandResult, Exit, Failure};
use crate::scenario;
use crate::scenario::fix::{plan, problem, Plan};
use crate::scenario::legacy::CURRENT;

pub(super) fn run(
    paths: &[PathBuf],
    dry_run: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> CommandResult {
    let files = scenario::discover(paths).map_err(Failure::input)?;
    let mut bad = 0;
    for f in &files {
        let old = match fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                writeln!(err, "{}\n", problem(f, format!("cannot read the scenario: {e}")))?;
                bad += 1;
                continue;
            }
        };
        if scenario::fixtures::is_fixture(f, &old) {
            // Read in the format of each scenario that uses it: the user's
            // `format` says how, and fixing the user is what moves it on.
            writeln!(
                err,
                "skipped {}  (a fixture: it is read in the format of the scenarios that use it)",
                f.display()
            )?;
            continue;
        }
        let plan = match plan(f, &old) {
            Ok(p) => p,
            Err(problems) => {
                for p in &problems {
                    writeln!(err, "{p}\n")?;
                }
                writeln!(err, "left as it is: {}\n", f.display())?;
                bad += 1;
                continue;
            }
        };
        // The diff goes to stdout alone (it can be applied); what was done, to
        // stdout without --dry-run, to stderr with it.
        let status: &mut dyn Write = if dry_run { &mut *err } else { &mut *out };
        match plan {
            Plan::Current => writeln!(status, "ok     {}  (format {CURRENT})", f.display())?,
            Plan::Fixed { text, was, changes } => {
                let verb = if dry_run {
                    "would fix"
                } else {
                    write_whole(f, &text).map_err(|e| {
                        Failure::setup(e.context(format!("roce check --fix: {}", f.display())))
                    })?;
                    "fixed"
                };
                writeln!(status, "{verb}  {}  (format {was} → {CURRENT})", f.display())?;
                for c in &changes {
                    writeln!(status, "         {c}")?;
                }
                if dry_run {
                    let name = f.display().to_string();
                    let diff = similar::TextDiff::from_lines(&old, &text);
                    write!(out, "{}", diff.unified_diff().header(&name, &name))?;
                }
            }
        }
    }
    if bad > 0 {
        return Err(Failure::input(anyhow::anyhow!(
            "roce check --fix: {bad} of {} scenario files have problems --fix cannot mend; they were left as they were",
            files.len()
        )));
    }
    Ok(Exit::Ok)
}

/// Writes `text` as the whole of `path`: into a new file beside it, made to
/// reach the disk, then renamed over it. On any error the old file is as it was
/// and the new one is removed.
fn write_whole(path: &Path, text: &str) -> anyhow::Result<()> {
    // A link is followed: the file it points to is the one fixed.
    let path = fs::canonicalize(path).with_context(|| format!("finding {}", path.display()))?;
    let dir = path.parent().context("a file without a directory")?;
    let name = path.file_name().context("a file without a name")?.to_string_lossy();
    let tmp = dir.join(format!(".{name}.roce-fix.{}", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut f = fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.set_permissions(fs::metadata(&path)?.permissions())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(anyhow::Error::new(e).context(format!("writing {}", tmp.display())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write that fails leaves the file as it was and nothing beside it; one
    /// that works replaces it whole, with its permissions.
    #[test]
    fn a_file_is_written_whole_or_not_at_all() {
        let d = std::env::temp_dir().join(format!("roce-fix-write-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        let f = d.join("x.toml");
        fs::write(&f, "old\n").unwrap();
        // Where the new text would go is taken: the write fails before the rename.
        let tmp = d.join(format!(".x.toml.roce-fix.{}", std::process::id()));
        fs::create_dir(&tmp).unwrap();
        let e = write_whole(&f, "new\n").unwrap_err();
        assert!(format!("{e:#}").contains(".x.toml.roce-fix."), "{e:#}");
        assert_eq!(fs::read_to_string(&f).unwrap(), "old\n");
        fs::remove_dir(&tmp).unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
        write_whole(&f, "new\n").unwrap();
        assert_eq!(fs::read_to_string(&f).unwrap(), "new\n");
        assert_eq!(fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o640);
        let left: Vec<_> = fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["x.toml"]);
        fs::remove_dir_all(&d).unwrap();
    }
}
