//! `roce run SCENARIO.toml… | DIR`: carry out scenarios with real verbs between two
//! endpoints (the lab's VMs by default), record the wire, judge completions, wire and
//! memory together, and report.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::lab::state::LabPaths;
use crate::scenario::runner::{self, Endpoints};

/// Exit codes of `roce run` (also `roce check`).
pub mod exit {
    /// Every expectation of every scenario held.
    pub const PASSED: u8 = 0;
    /// At least one expectation failed, or a scenario could not be carried out.
    pub const FAILED: u8 = 1;
    /// Bad scenario files or options, or no lab to run in: nothing was run.
    pub const SETUP: u8 = 2;
}

#[derive(Debug, Args)]
#[command(after_help = "EXIT STATUS\n  0 every expectation held; 1 some failed (or a scenario could not be carried out); 2 bad scenario files or options: nothing run.")]
pub struct RunArgs {
    /// Scenario files, or directories of them (every *.toml below, in name order)
    #[arg(required = true, value_name = "SCENARIO|DIR")]
    pub paths: Vec<PathBuf>,
    /// The lab to run in (booted if it is not up, reused if it is)
    #[arg(long, value_name = "NAME", conflicts_with = "endpoints")]
    pub lab: Option<String>,
    /// The lab's cache directory [default: $ROCE_LAB_DIR or ~/.cache/roce/lab]
    #[arg(long, value_name = "DIR")]
    pub lab_dir: Option<PathBuf>,
    /// Agents on real hosts instead of the lab: `a=HOST:PORT,b=HOST:PORT`, each
    /// running `roce agent --listen HOST:PORT`
    #[arg(long, value_name = "EP=HOST:PORT,…")]
    pub endpoints: Option<String>,
    /// Where to keep each scenario's capture (default: roce-runs/<time>)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write the results as JSON
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the results as JUnit XML (for CI systems)
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Only the summary line per scenario (failures still show their details)
    #[arg(long, short)]
    pub quiet: bool,
}

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
        bail!("no scenario files (*.toml) in {}", paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    Ok(out)
}

/// `a=host:port,b=host:port`.
pub fn parse_endpoints(s: &str) -> Result<BTreeMap<String, String>> {
    let mut m = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, addr)) = part.split_once('=') else {
            bail!("--endpoints: `{part}` is not ENDPOINT=HOST:PORT\nhint: e.g. --endpoints a=192.0.2.1:7000,b=192.0.2.2:7000");
        };
        if !addr.contains(':') {
            bail!("--endpoints: `{addr}` (endpoint {name}) has no port\nhint: HOST:PORT, where `roce agent --listen HOST:PORT` runs");
        }
        m.insert(name.trim().to_string(), addr.trim().to_string());
    }
    if m.is_empty() {
        bail!("--endpoints is empty");
    }
    Ok(m)
}

/// `roce-runs/<unix time>`: where captures go when `--out` is not given.
pub fn default_out() -> PathBuf {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    PathBuf::from("roce-runs").join(secs.to_string())
}

/// Where the endpoints are: the lab (booted when needed) or real hosts.
pub fn endpoints(args: &RunArgs) -> Result<Endpoints> {
    if let Some(e) = &args.endpoints {
        return Ok(Endpoints::Remote(parse_endpoints(e)?));
    }
    let root = args.lab_dir.clone().unwrap_or_else(crate::lab::default_root);
    let name = args
        .lab
        .clone()
        .or_else(|| std::env::var("ROCE_LAB_NAME").ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "default".into());
    let paths = LabPaths::new(&root, &name)?;
    if !paths.is_running() {
        let p = crate::lab::Progress::new(false);
        p.say(&format!("lab `{name}` is not up: booting it (it stays up for later runs; `roce lab down` stops it)"));
        let opts = crate::lab::UpOpts {
            accel: crate::lab::vm::Accel::Auto,
            boot_timeout: std::time::Duration::from_secs(300),
            idle_timeout_min: 120,
            rules: vec![],
            seed: 1,
        };
        let up = crate::lab::up(&paths, &opts, &p)?;
        p.say(&up.describe(&paths));
    }
    Ok(Endpoints::Lab(paths))
}

/// The capture file of a scenario: `<out>/<file stem>.pcapng`, unique.
pub fn capture_path(out: &Path, file: &Path, taken: &mut BTreeMap<PathBuf, ()>) -> PathBuf {
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "scenario".into());
    let mut p = out.join(format!("{stem}.pcapng"));
    let mut i = 2;
    while taken.contains_key(&p) {
        p = out.join(format!("{stem}-{i}.pcapng"));
        i += 1;
    }
    taken.insert(p.clone(), ());
    p
}

/// Runs one loaded scenario: the outcome and how long it took.
pub fn run_one(sc: &crate::scenario::model::Scenario, eps: &Endpoints, capture: &Path) -> (runner::Outcome, f64) {
    let t = Instant::now();
    let cap = matches!(eps, Endpoints::Lab(_)).then(|| capture.to_path_buf());
    let o = runner::execute(sc, eps, cap);
    (o, t.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_refuse() {
        let m = parse_endpoints("a=192.0.2.1:7000, b=host-b:7001").unwrap();
        assert_eq!(m["a"], "192.0.2.1:7000");
        assert_eq!(m["b"], "host-b:7001");
        assert!(parse_endpoints("a").unwrap_err().to_string().contains("ENDPOINT=HOST:PORT"));
        assert!(parse_endpoints("a=host").unwrap_err().to_string().contains("no port"));
        assert!(parse_endpoints(",").is_err());
    }

    #[test]
    fn discovery_is_recursive_sorted_and_says_what_is_missing() {
        let d = std::env::temp_dir().join(format!("roce-discover-{}", std::process::id()));
        std::fs::create_dir_all(d.join("sub")).unwrap();
        for f in ["b.toml", "a.toml", "notes.md", "sub/c.toml"] {
            std::fs::write(d.join(f), "").unwrap();
        }
        let found = discover(std::slice::from_ref(&d)).unwrap();
        let names: Vec<_> = found.iter().map(|p| p.strip_prefix(&d).unwrap().display().to_string()).collect();
        assert_eq!(names, ["a.toml", "b.toml", "sub/c.toml"]);
        assert!(discover(&[d.join("nope.toml")]).unwrap_err().to_string().contains("no such file"));
        assert!(discover(&[d.join("sub/c.toml")]).is_ok());
        std::fs::remove_dir_all(d.join("sub")).unwrap();
        for f in ["b.toml", "a.toml"] {
            std::fs::remove_file(d.join(f)).unwrap();
        }
        assert!(discover(std::slice::from_ref(&d)).unwrap_err().to_string().contains("no scenario files"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn capture_paths_are_unique() {
        let mut taken = BTreeMap::new();
        let out = Path::new("/r");
        assert_eq!(capture_path(out, Path::new("x/rc_send.toml"), &mut taken), Path::new("/r/rc_send.pcapng"));
        assert_eq!(capture_path(out, Path::new("y/rc_send.toml"), &mut taken), Path::new("/r/rc_send-2.pcapng"));
    }
}
