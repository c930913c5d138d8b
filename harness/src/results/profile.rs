//! Device profiles: what one NIC/driver setup does where the spec leaves it room
//! or where it deviates — which NAK a probe draws, whether a CE mark brings a
//! CNP, how a lost packet is recovered, whether the RNR timer is waited out.
//!
//! A profile is a TOML file of observations (`scenario::expect::judge`) per
//! scenario, written by `roce run --record-profile FILE` from a run on the
//! setup and read by `roce run --profile FILE`, which turns every difference into
//! a failed expectation. The scenarios stay spec-level; the profile pins down the
//! device. Profiles are kept in `profiles/` (e.g. `profiles/rxe-linux-6.1.toml`).
//!
//! Owns: [`Profile`], reading it ([`Profile::load`]) and recording it from a report;
//! which profile is a lab kernel's ([`for_kernel`]), and what a run is held to
//! ([`HeldTo`]).
//! Imports: `super::Report`, dissector's clock and UTC date; `toml`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// What a run's results are held to, said in its first line: a device profile
/// (the setup's recorded behaviour, IBA where it records none) or IBA alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeldTo {
    /// The profile `--profile` names.
    Named(PathBuf),
    /// The profile of the lab image's kernel, taken without being asked.
    LabKernel { path: PathBuf, kernel: String },
    /// IBA alone: the lab's kernel has no profile (`looked_for`: its file name).
    NoProfileFor { kernel: String, looked_for: String },
    /// IBA alone, for the reason given (`--no-profile`, real hosts, recording).
    Iba(&'static str),
}

impl std::fmt::Display for HeldTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeldTo::Named(p) => write!(f, "held to {} (--profile)", p.display()),
            HeldTo::LabKernel { path, kernel } => write!(
                f,
                "held to {}, the lab kernel's profile (Linux {kernel}); --no-profile judges against IBA alone",
                path.display()
            ),
            HeldTo::NoProfileFor { kernel, looked_for } => write!(
                f,
                "held to IBA alone: the lab kernel (Linux {kernel}) has no profile (no profiles/{looked_for}); --profile FILE names one"
            ),
            HeldTo::Iba(why) => write!(f, "held to IBA alone ({why})"),
        }
    }
}

/// A kernel's profile file name: `rxe-linux-<major>.<minor>.toml`
/// (`6.1.0-50-amd64` → `rxe-linux-6.1.toml`).
pub(crate) fn file_for_kernel(kernel: &str) -> String {
    let series: Vec<&str> = kernel
        .split(['.', '-', '+'])
        .take(2)
        .take_while(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    format!("rxe-linux-{}.toml", series.join("."))
}

/// The profile of the lab kernel `kernel`, when there is one: `profiles/<file>`
/// in the nearest directory at or above one of `near` (the scenarios given, the
/// working directory) that has it, else in the source tree this `roce` was built
/// from. `Err` names the file looked for.
pub(crate) fn for_kernel(kernel: &str, near: &[PathBuf]) -> Result<PathBuf, String> {
    let file = file_for_kernel(kernel);
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    near.iter()
        .flat_map(|p| p.ancestors())
        .chain(std::iter::once(built_from.as_path()))
        .map(|dir| dir.join("profiles").join(&file))
        .find(|p| p.is_file())
        .ok_or(file)
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Profile {
    pub name: String,
    /// Where and when it was recorded: device, kernel, roce version, date.
    #[serde(default)]
    pub recorded: BTreeMap<String, String>,
    /// Observations by scenario name.
    #[serde(default)]
    pub scenario: BTreeMap<String, BTreeMap<String, String>>,
    /// Notes on observations, by scenario name and observation key: what the IBA
    /// spec says there and whether this setup deviates. Written by people, never
    /// compared; recording the profile again keeps those whose observation is
    /// still recorded.
    #[serde(default)]
    pub note: BTreeMap<String, BTreeMap<String, String>>,
    /// Scenarios this setup cannot be asked to run, by name: they crash it (a
    /// kernel bug a finding of `roce fuzz` reproduces), with what its console
    /// said. Written by people; a run under the profile, or recording it again,
    /// skips them with that reason (run the scenario alone, without the
    /// profile, to see the crash); recording again keeps them.
    #[serde(default)]
    pub crashes: BTreeMap<String, String>,
    /// The directory of wire snapshots a run under this profile is held to
    /// (`roce suite --snapshots`), relative to the profile's file: the wire this
    /// setup drew, kept. Written by people; recording again keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<PathBuf>,
    /// The file it was read from (to find `snapshots` from).
    #[serde(skip)]
    pub file: Option<PathBuf>,
}

impl Profile {
    pub(crate) fn load(path: &Path) -> Result<Profile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the profile {}", path.display()))?;
        Profile::parse(&text, path)
    }

    /// A profile's text, as read from `path` (which names it in the error and
    /// is where its `snapshots` are found from).
    pub(crate) fn parse(text: &str, path: &Path) -> Result<Profile> {
        let p: Profile = toml::from_str(text).map_err(|e| {
            anyhow::anyhow!("{}: not a roce profile: {e}\nhint: record one with `roce run --record-profile FILE`", path.display())
        })?;
        Ok(Profile { file: Some(path.to_path_buf()), ..p })
    }

    /// Where the wire snapshots it names are: `snapshots` from the profile's
    /// directory.
    pub(crate) fn snapshots_dir(&self) -> Option<PathBuf> {
        let dir = self.file.as_deref().and_then(Path::parent).unwrap_or(Path::new("."));
        self.snapshots.as_ref().map(|s| dir.join(s))
    }

    /// A profile from a run: every scenario carried out to the end (one whose own
    /// expectations failed included: a profile says what the setup does, not what
    /// the spec wants).
    pub(crate) fn record(name: &str, r: &super::Report, previous: Option<&Profile>) -> Profile {
        let mut p = Profile { name: name.to_string(), ..Default::default() };
        let mut devices = std::collections::BTreeSet::new();
        let mut kernels = std::collections::BTreeSet::new();
        // A skipped scenario did nothing on this setup: nothing to record.
        for s in r.scenarios.iter().filter(|s| s.error.is_none() && s.skip_reason.is_none()) {
            for e in s.endpoints.values() {
                devices.insert(e.device.clone());
                kernels.extend(e.kernel.clone());
            }
            p.scenario.insert(s.name.clone(), s.observations.clone());
        }
        let join =
            |v: std::collections::BTreeSet<String>| v.into_iter().collect::<Vec<_>>().join(", ");
        p.recorded.insert("device".into(), join(devices));
        p.recorded.insert("kernel".into(), join(kernels));
        p.recorded.insert("roce".into(), env!("CARGO_PKG_VERSION").into());
        p.recorded.insert("date".into(), today());
        if let Some(prev) = previous {
            p.crashes = prev.crashes.clone();
            p.snapshots = prev.snapshots.clone();
            for (scenario, notes) in &prev.note {
                let Some(obs) = p.scenario.get(scenario) else { continue };
                let kept: BTreeMap<String, String> = notes
                    .iter()
                    .filter(|(k, _)| obs.contains_key(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if !kept.is_empty() {
                    p.note.insert(scenario.clone(), kept);
                }
            }
        }
        p
    }
}

/// `YYYY-MM-DD` (UTC), from the system clock.
fn today() -> String {
    let secs = dissector::capture::unix_now().as_secs();
    dissector::text::utc(secs)[..10].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_release_names_its_series_profile() {
        assert_eq!(file_for_kernel("6.1.0-50-amd64"), "rxe-linux-6.1.toml");
        assert_eq!(file_for_kernel("6.12.117+deb13-amd64"), "rxe-linux-6.12.toml");
        assert_eq!(file_for_kernel("7.3.4"), "rxe-linux-7.3.toml");
    }

    #[test]
    fn the_kernel_profile_is_the_nearest_above_the_scenarios() {
        let root = std::env::temp_dir().join(format!("roce-kprof-{}", std::process::id()));
        let suite = root.join("suite");
        std::fs::create_dir_all(suite.join("deep/er")).unwrap();
        std::fs::create_dir_all(root.join("profiles")).unwrap();
        std::fs::write(root.join("profiles/rxe-linux-9.9.toml"), "name = \"x\"\n").unwrap();
        let found = for_kernel("9.9.1-1-amd64", &[suite.join("deep/er/a.toml")]);
        assert_eq!(found, Ok(root.join("profiles/rxe-linux-9.9.toml")));
        // A nearer one wins; a kernel with none says which file it looked for.
        std::fs::create_dir_all(suite.join("profiles")).unwrap();
        std::fs::write(suite.join("profiles/rxe-linux-9.9.toml"), "name = \"y\"\n").unwrap();
        assert_eq!(
            for_kernel("9.9.1", &[suite.join("deep/er/a.toml")]),
            Ok(suite.join("profiles/rxe-linux-9.9.toml"))
        );
        assert_eq!(
            for_kernel("9.8.0", std::slice::from_ref(&suite)),
            Err("rxe-linux-9.8.toml".to_string())
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_first_line_says_what_a_run_is_held_to() {
        let k = HeldTo::LabKernel {
            path: "profiles/rxe-linux-6.1.toml".into(),
            kernel: "6.1.0-50-amd64".into(),
        };
        assert_eq!(
            k.to_string(),
            "held to profiles/rxe-linux-6.1.toml, the lab kernel's profile (Linux 6.1.0-50-amd64); --no-profile judges against IBA alone"
        );
        let none = HeldTo::NoProfileFor {
            kernel: "6.2.0".into(),
            looked_for: "rxe-linux-6.2.toml".into(),
        };
        assert!(none
            .to_string()
            .starts_with("held to IBA alone: the lab kernel (Linux 6.2.0) has no profile"));
    }

    #[test]
    fn a_bad_profile_says_where() {
        let d = std::env::temp_dir().join(format!("roce-profile-{}.toml", std::process::id()));
        std::fs::write(&d, "name = \"x\"\n[scenario.s]\nk = 3\n").unwrap();
        let e = format!("{:#}", Profile::load(&d).unwrap_err());
        std::fs::remove_file(&d).unwrap();
        assert!(e.contains("not a roce profile") && e.contains("line 3"), "{e}");
    }

    #[test]
    fn notes_survive_recording_again_while_their_observation_does() {
        let r: super::super::Report = serde_json::from_value(serde_json::json!({
            "scenarios": [
                {"name": "s", "file": "s.toml", "pass": true, "status": "passed", "error": null, "verdicts": [], "capture": null, "duration_s": 0.1,
                 "endpoints": {}, "connections": [], "observations": {"probe x": "ACK (PSN next)"}}
            ],
            "passed": 1, "failed": 0, "skipped": 0, "duration_s": 0.1
        }))
        .unwrap();
        let mut prev = Profile::default();
        prev.note.insert(
            "s".into(),
            BTreeMap::from([
                ("probe x".into(), "IBA C9-92: NAK Invalid Request; deviates".into()),
                ("probe gone".into(), "old".into()),
            ]),
        );
        prev.note.insert("removed scenario".into(), BTreeMap::from([("k".into(), "v".into())]));
        prev.crashes.insert("a finding".into(), "BUG: kernel NULL pointer dereference".into());
        prev.snapshots = Some("snapshots/rxe".into());
        let p = Profile::record("rxe", &r, Some(&prev));
        assert_eq!(p.crashes, prev.crashes, "what crashes the setup is people's word: kept");
        assert_eq!(p.snapshots, prev.snapshots, "the snapshots it names too");
        assert_eq!(p.scenario["s"]["probe x"], "ACK (PSN next)");
        assert_eq!(p.note.len(), 1, "{:?}", p.note);
        assert_eq!(
            p.note["s"].keys().collect::<Vec<_>>(),
            ["probe x"],
            "a note on an observation no longer recorded goes"
        );
    }

    /// A profile names its setup's snapshots relative to its own file, and
    /// written out again it still names them.
    #[test]
    fn a_profile_names_its_snapshots_from_where_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profiles/rxe.toml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "name = \"rxe\"\nsnapshots = \"../snapshots/rxe\"\n").unwrap();
        let p = Profile::load(&path).unwrap();
        assert_eq!(p.snapshots_dir(), Some(dir.path().join("profiles/../snapshots/rxe")));
        let again: Profile = toml::from_str(&crate::render::profile::render(&p)).unwrap();
        assert_eq!(again.snapshots, p.snapshots);
        let bare = Profile::load(&{
            std::fs::write(&path, "name = \"rxe\"\n").unwrap();
            path.clone()
        })
        .unwrap();
        assert_eq!(bare.snapshots_dir(), None);
    }
}
