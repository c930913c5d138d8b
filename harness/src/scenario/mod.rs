//! Scenarios: the TOML format as written ([`file`](mod@file)), checked into a typed
//! scenario ([`model`]) with every problem reported at `file:line:col`
//! ([`check`], [`diag`]); a scenario composed with the fixtures it `use`s
//! ([`fixtures`]) and a parameterised file expanded into its cases first
//! ([`cases`]); a file of an older format read as it meant it, or written in the
//! current one ([`legacy`]; [`fix`](mod@fix), the rewrite `roce check --fix`
//! writes); the wire expectations' patterns ([`pattern`]).
//!
//! Owns: the scenario format and its rules, and finding and loading scenario files
//! ([`discover`], `load_all`). Imports: the protocol's stream vocabulary and limits
//! (`crate::protocol`: the model's stream content, sizes, spread and verbs,
//! `STREAM_MESSAGES`, `READ_BACK_MAX`), the verbs' names (`crate::verbs`), dissector's
//! vocabulary (opcodes, PSNs, NAK kinds, `UnknownName`), the lab's fault-rule parser,
//! the conformance catalogue (`crate::catalogue`: the ids `spec` may name);
//! `toml`, `serde` and `schemars`. Nothing runs here.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub(crate) mod cases;
pub(crate) mod check;
pub(crate) mod diag;
pub(crate) mod file;
pub(crate) mod fix;
pub(crate) mod fixtures;
pub(crate) mod legacy;
pub(crate) mod model;
pub(crate) mod pattern;

pub(crate) use check::load;
pub(crate) use diag::Diagnostic;
pub(crate) use model::Scenario;

/// Every `*.toml` under the given paths, files as given, directories recursively in
/// name order.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading the directory {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                // A fixture is setup scenarios `use`, no scenario of its own.
                if p.file_name().is_some_and(|n| n == "fixtures") {
                    continue;
                }
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "toml") {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else if p.exists() {
            out.push(p.clone());
        } else {
            bail!("{}: no such file or directory", p.display());
        }
    }
    if out.is_empty() {
        bail!(
            "no scenario files (*.toml) in {}",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(out)
}

/// Every file loaded and checked, in order, a parameterised file as one scenario per
/// case (each with the file's path), or every problem found (each with its
/// file:line:col), when any file has one: then nothing may run.
pub(crate) fn load_all(
    files: &[PathBuf],
) -> std::result::Result<Vec<(PathBuf, Scenario)>, Vec<Diagnostic>> {
    let mut loaded = Vec::new();
    let mut problems = Vec::new();
    for f in files {
        match check::load(f) {
            Ok(cases) => loaded.extend(cases.into_iter().map(|sc| (f.clone(), sc))),
            Err(d) => problems.extend(d),
        }
    }
    if problems.is_empty() {
        Ok(loaded)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_is_recursive_sorted_and_says_what_is_missing() {
        let d = std::env::temp_dir().join(format!("roce-discover-{}", std::process::id()));
        std::fs::create_dir_all(d.join("sub")).unwrap();
        for f in ["b.toml", "a.toml", "notes.md", "sub/c.toml"] {
            std::fs::write(d.join(f), "").unwrap();
        }
        let found = discover(std::slice::from_ref(&d)).unwrap();
        let names: Vec<_> =
            found.iter().map(|p| p.strip_prefix(&d).unwrap().display().to_string()).collect();
        assert_eq!(names, ["a.toml", "b.toml", "sub/c.toml"]);
        assert!(discover(&[d.join("nope.toml")]).unwrap_err().to_string().contains("no such file"));
        assert!(discover(&[d.join("sub/c.toml")]).is_ok());
        std::fs::remove_dir_all(d.join("sub")).unwrap();
        for f in ["b.toml", "a.toml"] {
            std::fs::remove_file(d.join(f)).unwrap();
        }
        assert!(discover(std::slice::from_ref(&d))
            .unwrap_err()
            .to_string()
            .contains("no scenario files"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
