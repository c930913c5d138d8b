//! `roce suite`: a regression suite run. It is `roce run` over a directory of
//! scenarios (optionally held to a device profile) that leaves, in its output
//! directory, the full JSON report, the HTML report with ladder diagrams, the
//! captures, and `suite.json`: what passed and what the setup did, without times,
//! addresses or QPNs, sorted, one fact per line — made to be kept and diffed
//! against the next run's (`--baseline`, or `roce diff OLD NEW`) to see what
//! changed with the last driver or firmware.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::run::{self, Report, RunArgs};

#[derive(Debug, Args)]
#[command(after_help = "OUTPUT (in --out)\n  suite.json   what passed and what the setup did: keep it, diff the next run against it\n  report.json  the full results (roce run --json)\n  report.html  the HTML report with a ladder diagram per scenario\n  *.pcapng     each scenario's wire\n\nEXIT STATUS\n  0 every expectation held; 1 some failed; 2 bad scenario files or options: nothing run.")]
pub struct SuiteArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// A previous run's suite.json: say what changed since
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(after_help = "EXIT STATUS\n  0 the same; 1 something changed; 2 a file is missing or not a suite.json.")]
pub struct DiffArgs {
    /// The earlier suite.json
    pub old: PathBuf,
    /// The later suite.json
    pub new: PathBuf,
}

/// One scenario in `suite.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub file: String,
    pub pass: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The failed expectations: `what: expected …; actual …` (the actual part
    /// may carry times; a changed failure shows as changed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    #[serde(default)]
    pub observations: BTreeMap<String, String>,
}

/// `suite.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Suite {
    /// Per endpoint: device, kernel, VM: what the run was on.
    pub setup: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    pub passed: usize,
    pub failed: usize,
    /// By scenario name.
    pub scenarios: BTreeMap<String, Entry>,
}

impl Suite {
    pub fn from_report(r: &Report) -> Suite {
        let mut setup: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for s in &r.scenarios {
            for (ep, f) in &s.endpoints {
                let e = setup.entry(ep.clone()).or_default();
                e.entry("device".into()).or_insert_with(|| f.device.clone());
                if let Some(k) = &f.kernel {
                    e.entry("kernel".into()).or_insert_with(|| k.clone());
                }
                if let Some(v) = &f.vm {
                    e.entry("vm".into()).or_insert_with(|| v.clone());
                }
            }
        }
        let scenarios = r
            .scenarios
            .iter()
            .map(|s| {
                let failed = s.verdicts.iter().filter(|v| !v.pass).map(|v| format!("{}: expected {}; actual {}", v.what, v.expected, v.actual)).collect();
                (s.name.clone(), Entry { file: s.file.clone(), pass: s.pass, error: s.error.clone(), failed, observations: s.observations.clone() })
            })
            .collect();
        Suite { setup, profile: r.profile.clone(), passed: r.passed, failed: r.failed, scenarios }
    }

    pub fn load(path: &Path) -> Result<Suite> {
        let b = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_slice(&b).map_err(|e| anyhow::anyhow!("{}: not a suite.json from `roce suite`: {e}", path.display()))
    }
}

/// What changed from `old` to `new`, in words, one line per change; empty when
/// nothing did.
pub fn diff(old: &Suite, new: &Suite) -> Vec<String> {
    let mut out = Vec::new();
    let eps: std::collections::BTreeSet<&String> = old.setup.keys().chain(new.setup.keys()).collect();
    for ep in eps {
        let (o, n) = (old.setup.get(ep.as_str()), new.setup.get(ep.as_str()));
        let keys: std::collections::BTreeSet<&String> = o.into_iter().chain(n).flat_map(|m| m.keys()).collect();
        for k in keys {
            let (a, b) = (o.and_then(|m| m.get(k.as_str())), n.and_then(|m| m.get(k.as_str())));
            if a != b {
                out.push(format!("setup: endpoint {ep} {k}: {} → {}", a.map_or("-", |s| s), b.map_or("-", |s| s)));
            }
        }
    }
    if old.profile != new.profile {
        out.push(format!("profile: {} → {}", old.profile.as_deref().unwrap_or("none"), new.profile.as_deref().unwrap_or("none")));
    }
    let names: std::collections::BTreeSet<&String> = old.scenarios.keys().chain(new.scenarios.keys()).collect();
    for name in names {
        match (old.scenarios.get(name.as_str()), new.scenarios.get(name.as_str())) {
            (None, Some(n)) => out.push(format!("+ new: {name} ({})", if n.pass { "passes" } else { "fails" })),
            (Some(_), None) => out.push(format!("- gone: {name}")),
            (Some(o), Some(n)) => {
                let mut lines = Vec::new();
                let keys: std::collections::BTreeSet<&String> = o.observations.keys().chain(n.observations.keys()).collect();
                for k in keys {
                    let (a, b) = (o.observations.get(k.as_str()), n.observations.get(k.as_str()));
                    if a != b {
                        lines.push(format!("    {k}: {} → {}", a.map_or("(not seen)", |s| s), b.map_or("(not seen)", |s| s)));
                    }
                }
                for f in n.failed.iter().filter(|f| !o.failed.contains(f)) {
                    lines.push(format!("    now fails: {f}"));
                }
                if o.error != n.error {
                    if let Some(e) = &n.error {
                        lines.push(format!("    run stopped: {}", e.lines().next().unwrap_or(e)));
                    }
                }
                let head = match (o.pass, n.pass) {
                    (true, false) => format!("✗ now failing: {name}"),
                    (false, true) => format!("✓ now passing: {name}"),
                    _ if !lines.is_empty() => format!("~ changed: {name}"),
                    _ => continue,
                };
                out.push(head);
                out.extend(lines);
            }
            (None, None) => {}
        }
    }
    out
}

fn write_diff(out: &mut dyn std::io::Write, base: &Path, changes: &[String]) -> std::io::Result<()> {
    if changes.is_empty() {
        return writeln!(out, "compared with {}: nothing changed", base.display());
    }
    writeln!(out, "compared with {}:", base.display())?;
    for c in changes {
        writeln!(out, "  {c}")?;
    }
    Ok(())
}

/// `roce suite`.
pub fn run(mut a: SuiteArgs, out: &mut dyn std::io::Write, err: &mut dyn std::io::Write) -> Result<u8> {
    // The baseline is read first: a wrong path is said before an hour of running.
    let baseline = match a.baseline.as_deref().map(Suite::load).transpose() {
        Ok(b) => b,
        Err(e) => {
            writeln!(err, "roce suite: {e:#}")?;
            return Ok(run::exit::SETUP);
        }
    };
    let Some(mut loaded) = run::discover_and_load(&a.run.paths, "roce suite", err)? else {
        return Ok(run::exit::SETUP);
    };
    // On real hosts there is no switch to apply faults: those scenarios are left
    // out of the suite (said, not silently), the rest runs.
    if a.run.endpoints.is_some() {
        let (lab_only, rest): (Vec<_>, Vec<_>) = loaded.into_iter().partition(|(_, sc)| !sc.faults.is_empty());
        if !lab_only.is_empty() {
            let names: Vec<String> = lab_only.iter().map(|(f, _)| f.display().to_string()).collect();
            writeln!(out, "note: left out {} scenarios with [[fault]] rules, which need the lab's switch: {}", lab_only.len(), names.join(", "))?;
        }
        if rest.is_empty() {
            writeln!(err, "roce suite: every scenario given needs the lab's switch; nothing to run on real hosts")?;
            return Ok(run::exit::SETUP);
        }
        loaded = rest;
    }
    let dir = a.run.out.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        PathBuf::from("roce-suite").join(secs.to_string())
    });
    a.run.out = Some(dir.clone());
    a.run.json.get_or_insert(dir.join("report.json"));
    let html = a.run.html.get_or_insert(dir.join("report.html")).clone();
    let (code, Some(report)) = run::execute_loaded(a.run, loaded, out, err)? else {
        return Ok(run::exit::SETUP);
    };
    let suite = Suite::from_report(&report);
    let path = dir.join("suite.json");
    run::write_atomically(&path, &serde_json::to_vec_pretty(&suite)?)?;
    writeln!(out, "suite report: {} (diff it against the next run's), {}", path.display(), html.display())?;
    if let (Some(b), Some(p)) = (&baseline, &a.baseline) {
        write_diff(out, p, &diff(b, &suite))?;
    }
    Ok(code)
}

/// `roce diff OLD NEW`.
pub fn run_diff(a: DiffArgs, out: &mut dyn std::io::Write, err: &mut dyn std::io::Write) -> Result<u8> {
    let (old, new) = match (Suite::load(&a.old), Suite::load(&a.new)) {
        (Ok(o), Ok(n)) => (o, n),
        (Err(e), _) | (_, Err(e)) => {
            writeln!(err, "roce diff: {e:#}\nhint: give two suite.json files written by `roce suite`")?;
            return Ok(2);
        }
    };
    let changes = diff(&old, &new);
    write_diff(out, &a.old, &changes)?;
    Ok(u8::from(!changes.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pass: bool, obs: &[(&str, &str)]) -> Entry {
        Entry {
            file: "s.toml".into(),
            pass,
            error: None,
            failed: if pass { vec![] } else { vec!["wire of QP q from a: expected x; actual y".into()] },
            observations: obs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    fn suite(kernel: &str, s: &[(&str, Entry)]) -> Suite {
        let mut setup = BTreeMap::new();
        setup.insert("a".to_string(), [("kernel".to_string(), kernel.to_string())].into_iter().collect());
        Suite {
            setup,
            profile: None,
            passed: s.iter().filter(|(_, e)| e.pass).count(),
            failed: s.iter().filter(|(_, e)| !e.pass).count(),
            scenarios: s.iter().map(|(n, e)| (n.to_string(), e.clone())).collect(),
        }
    }

    #[test]
    fn the_same_run_has_no_changes_and_survives_json() {
        let a = suite("6.1", &[("ce", entry(true, &[("wire q from a: CNP after CE", "no")]))]);
        assert!(diff(&a, &a).is_empty());
        let back: Suite = serde_json::from_slice(&serde_json::to_vec_pretty(&a).unwrap()).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn a_new_driver_shows_what_changed() {
        let old = suite(
            "6.1",
            &[
                ("ce", entry(true, &[("wire q from a: CNP after CE", "no")])),
                ("ahead", entry(true, &[("probe ahead", "NAK PSN Sequence Error (PSN next)")])),
                ("rnr", entry(false, &[])),
                ("old only", entry(true, &[])),
            ],
        );
        let new = suite(
            "6.6",
            &[
                ("ce", entry(true, &[("wire q from a: CNP after CE", "yes")])),
                ("ahead", entry(false, &[("probe ahead", "no answer")])),
                ("rnr", entry(true, &[])),
                ("new only", entry(true, &[])),
            ],
        );
        let d = diff(&old, &new);
        let text = d.join("\n");
        assert!(text.contains("setup: endpoint a kernel: 6.1 → 6.6"), "{text}");
        assert!(text.contains("~ changed: ce\n    wire q from a: CNP after CE: no → yes"), "{text}");
        assert!(text.contains("✗ now failing: ahead\n    probe ahead: NAK PSN Sequence Error (PSN next) → no answer\n    now fails: wire"), "{text}");
        assert!(text.contains("✓ now passing: rnr"), "{text}");
        assert!(text.contains("+ new: new only (passes)") && text.contains("- gone: old only"), "{text}");
    }
}
