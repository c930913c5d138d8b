//! `roce check`: validate scenario files without running them; with `--fix`,
//! rewrite them in the current scenario format ([`fix`]).
//!
//! Owns: `roce check`'s options and its output; which scenarios `--case` picks
//! (for `run`, `suite` and `repro`). Imports: `crate::scenario` (discovery
//! and loading), `super::exit`.
use std::io::Write;
use std::path::PathBuf;

use anyhow::anyhow;

use super::exit::{help, CommandResult, Exit, Failure};
use crate::scenario;

#[derive(Debug, clap::Args)]
#[command(after_help = help(&[(Exit::Ok, "every file is a valid scenario (warnings, e.g. a scenario naming no catalogue rule in `spec`, or a key an older format had, do not change that); with --fix, every file is in the current format, or --dry-run said how it would be"), (Exit::BadInput, "at least one is not (each problem printed at file:line:col); with --fix, those files were left as they were"), (Exit::Setup, "--fix could not write a file (it is left as it was)")]))]
pub struct CheckArgs {
    /// Scenario files, or directories of them (every *.toml below)
    #[arg(required = true, value_name = "SCENARIO|DIR")]
    pub paths: Vec<PathBuf>,
    /// Rewrite each file in the current scenario format (`format = N`, keys an
    /// older format had removed, a literal `${` written `$${`), keeping its
    /// comments and layout; a file with problems the fix cannot mend is left as it
    /// is (docs/format-changes.md lists the formats)
    #[arg(long)]
    pub fix: bool,
    /// With --fix: print the unified diff of what it would change, and write
    /// nothing
    #[arg(long, requires = "fix")]
    pub dry_run: bool,
}

mod fix;

/// Every scenario under `paths`, loaded and checked before anything runs; every
/// problem said on `err` (`who: ` names the command).
pub(super) fn load(
    paths: &[PathBuf],
    who: &str,
    err: &mut dyn Write,
) -> Result<Vec<(PathBuf, scenario::model::Scenario)>, Failure> {
    let files = scenario::discover(paths).map_err(Failure::input)?;
    load_files(&files, who, err)
}

/// Whether a scenario's (or case's) `name` matches a `--case` pattern: a glob
/// over the whole name when the pattern has `*` or `?`, else a substring; letter
/// case ignored.
pub(super) fn name_matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let n: Vec<char> = name.to_lowercase().chars().collect();
    if !p.iter().any(|c| *c == '*' || *c == '?') {
        return name.to_lowercase().contains(&pattern.to_lowercase());
    }
    // Glob, backtracking to the last `*`.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        match p.get(i) {
            Some('*') => {
                star = Some((i, j));
                i += 1;
            }
            Some(c) if *c == '?' || *c == n[j] => {
                i += 1;
                j += 1;
            }
            _ => match star {
                Some((si, sj)) => {
                    i = si + 1;
                    j = sj + 1;
                    star = Some((si, sj + 1));
                }
                None => return false,
            },
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// The scenarios `--case` selects (all without it); an error when none is.
pub(super) fn select(
    loaded: Vec<(PathBuf, scenario::model::Scenario)>,
    patterns: &[String],
    who: &str,
) -> Result<Vec<(PathBuf, scenario::model::Scenario)>, Failure> {
    if patterns.is_empty() {
        return Ok(loaded);
    }
    let all = loaded.len();
    let kept: Vec<_> = loaded
        .into_iter()
        .filter(|(_, sc)| patterns.iter().any(|p| name_matches(p, &sc.name)))
        .collect();
    if kept.is_empty() {
        return Err(Failure::input(anyhow!(
            "{who}: --case {} matches none of the {all} scenarios and cases; nothing was run\nhint: `{who} --list` with the same files prints their names",
            patterns.join(" --case ")
        )));
    }
    Ok(kept)
}

/// `--list`: every name that would run, one a line.
pub(super) fn list(
    loaded: &[(PathBuf, scenario::model::Scenario)],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for (_, sc) in loaded {
        writeln!(out, "{}", sc.name)?;
    }
    Ok(())
}

/// Who uses which fixture: the scenario files under the directory that holds a
/// fixture's outermost `fixtures` directory, each tree listed and each file's
/// `use` read once for all the fixtures asked about, named from `here`.
struct FixtureUsers {
    trees: std::collections::HashMap<PathBuf, Vec<PathBuf>>,
    uses: scenario::fixtures::UseGraph,
    /// The working directory: users below it are named from it, as the user
    /// would name them.
    here: PathBuf,
}

impl FixtureUsers {
    fn new() -> FixtureUsers {
        FixtureUsers {
            trees: Default::default(),
            uses: Default::default(),
            here: std::env::current_dir().unwrap_or_default(),
        }
    }

    /// The scenario files that use `fixture`.
    fn of(&mut self, fixture: &std::path::Path) -> Vec<PathBuf> {
        let Some(root) = scenario::fixtures::users_root(fixture) else { return Vec::new() };
        // A directory with no scenario in it has none that uses the fixture.
        let all = self.trees.entry(root).or_insert_with_key(|root| {
            scenario::discover(std::slice::from_ref(root)).unwrap_or_default()
        });
        all.iter()
            .filter(|f| self.uses.uses(f, fixture))
            .map(|f| f.strip_prefix(&self.here).map_or_else(|_| f.clone(), PathBuf::from))
            .collect()
    }
}

fn load_files(
    files: &[PathBuf],
    who: &str,
    err: &mut dyn Write,
) -> Result<Vec<(PathBuf, scenario::model::Scenario)>, Failure> {
    match scenario::load_all(files) {
        Ok(loaded) => Ok(loaded),
        Err(problems) => {
            // Each a report of several lines; a blank line between them, as rustc.
            for p in &problems {
                writeln!(err, "{p}\n")?;
            }
            let bad: std::collections::BTreeSet<&PathBuf> =
                problems.iter().map(|p| &p.file).collect();
            Err(Failure::input(anyhow::anyhow!(
                "{who}: {} of {} scenario files have problems; nothing was run",
                bad.len(),
                files.len()
            )))
        }
    }
}

pub(super) fn run(a: CheckArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    if a.fix {
        return fix::run(&a.paths, a.dry_run, out, err);
    }
    let files = scenario::discover(&a.paths).map_err(Failure::input)?;
    let (fixtures, mut files): (Vec<PathBuf>, Vec<PathBuf>) = files.into_iter().partition(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| scenario::fixtures::is_fixture(f, &t))
    });
    // A fixture is checked through the scenarios that use it: alone, its names
    // and placeholders mean nothing.
    let mut users_of = FixtureUsers::new();
    for f in &fixtures {
        let users = users_of.of(f);
        match users.len() {
            0 => writeln!(
                err,
                "warning: {} is a fixture that no scenario beside it uses: only its TOML was checked",
                f.display()
            )?,
            n => writeln!(
                out,
                "fixture  {}  used by {n} scenario file{}, checked with {}",
                f.display(),
                if n == 1 { "" } else { "s" },
                if n == 1 { "it" } else { "them" }
            )?,
        }
        files.extend(users);
    }
    files.sort();
    files.dedup();
    if files.is_empty() {
        return Ok(Exit::Ok);
    }
    let loaded = load_files(&files, "roce check", err)?;
    // Warnings are `roce check`'s alone: a run would repeat them for every file.
    for (_, sc) in &loaded {
        for w in &sc.warnings {
            writeln!(err, "{w}")?;
        }
    }
    let plural = |k: usize, w: &str| format!("{k} {w}{}", if k == 1 { "" } else { "s" });
    let mut i = 0;
    while i < loaded.len() {
        let (f, sc) = &loaded[i];
        let n = loaded[i..].iter().take_while(|(g, _)| g == f).count();
        if sc.case.is_none() {
            writeln!(out, "ok  {}  {} ({})", f.display(), sc.name, sc.shape())?;
        } else {
            // A parameterised file: how many cases, then each by its name.
            writeln!(out, "ok  {}  {}", f.display(), plural(n, "case"))?;
            for (_, c) in &loaded[i..i + n] {
                writeln!(out, "      {} ({})", c.name, c.shape())?;
            }
        }
        i += n;
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_patterns_are_substrings_or_globs() {
        let n = "MR access: WRITE [no remote_write]";
        assert!(name_matches("no remote", n));
        assert!(name_matches("NO REMOTE", n), "letter case is ignored");
        assert!(!name_matches("remote_read", n));
        assert!(name_matches("MR access*[no *]", n));
        assert!(name_matches("*WRITE ?no*", n));
        assert!(!name_matches("*read*", n));
        assert!(name_matches("*", n));
        assert!(!name_matches("MR*", "x MR"), "a glob matches the whole name");
    }
}
