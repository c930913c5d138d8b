//! Device profiles: what one NIC/driver setup does where the spec leaves it room
//! or where it deviates — which NAK a probe draws, whether a CE mark brings a
//! CNP, how a lost packet is recovered, whether the RNR timer is waited out.
//!
//! A profile is a TOML file of observations (`scenario::expect::judge`) per
//! scenario, written by `roce run --record-profile FILE` from a run on the
//! setup and read by `roce run --profile FILE`, which turns every difference into
//! a failed expectation. The scenarios stay spec-level; the profile pins down the
//! device. Profiles are kept in `profiles/` (e.g. `profiles/rxe-linux-6.1.toml`).
use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::scenario::expect::Verdict;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    /// Where and when it was recorded: device, kernel, roce version, date.
    #[serde(default)]
    pub recorded: BTreeMap<String, String>,
    /// Observations by scenario name.
    #[serde(default)]
    pub scenario: BTreeMap<String, BTreeMap<String, String>>,
}

impl Profile {
    pub fn load(path: &Path) -> Result<Profile> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading the profile {}", path.display()))?;
        toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!("{}: not a roce profile: {e}\nhint: record one with `roce run --record-profile FILE`", path.display())
        })
    }

    /// The profile's verdicts on one scenario's observations: one per recorded
    /// observation, failed where this run differs. `None` when the profile does not
    /// know the scenario.
    pub fn judge(&self, scenario: &str, seen: &BTreeMap<String, String>) -> Option<Vec<Verdict>> {
        let want = self.scenario.get(scenario)?;
        Some(
            want.iter()
                .map(|(k, v)| {
                    let actual = seen.get(k).cloned().unwrap_or_else(|| "not seen in this run".into());
                    Verdict {
                        kind: "profile".into(),
                        what: format!("{} profile: {k}", self.name),
                        pass: &actual == v,
                        expected: v.clone(),
                        actual,
                        detail: None,
                    }
                })
                .collect(),
        )
    }

    /// The profile as TOML: stable order, one observation per line, so two
    /// profiles diff line by line.
    pub fn to_toml(&self) -> String {
        let mut s = String::from(
            "# A roce device profile: what this setup does where the spec leaves room or where\n\
             # it deviates, per scenario. Written by `roce run --record-profile`; compared by\n\
             # `roce run --profile` (every difference fails the scenario).\n",
        );
        s += &format!("name = {}\n\n[recorded]\n", quote(&self.name));
        for (k, v) in &self.recorded {
            s += &format!("{} = {}\n", key(k), quote(v));
        }
        for (name, obs) in &self.scenario {
            s += &format!("\n[scenario.{}]\n", quote(name));
            for (k, v) in obs {
                s += &format!("{} = {}\n", quote(k), quote(v));
            }
        }
        s
    }
}

fn key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        k.to_string()
    } else {
        quote(k)
    }
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => q.push_str(&format!("\\u{:04x}", c as u32)),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn round_trip_through_toml_with_awkward_names() {
        let mut p = Profile { name: "rxe-linux-6.1".into(), ..Default::default() };
        p.recorded.insert("kernel".into(), "6.1.0-28-amd64".into());
        p.recorded.insert("a \"quoted\" key".into(), "x\\y\nz".into());
        p.scenario.insert("conformance: a \"PSN\" ahead".into(), obs(&[("probe ahead", "NAK PSN Sequence Error (PSN next)")]));
        let text = p.to_toml();
        let back: Profile = toml::from_str(&text).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn deviations_fail_and_unknown_scenarios_are_not_judged() {
        let mut p = Profile { name: "rxe".into(), ..Default::default() };
        p.scenario.insert("s".into(), obs(&[("wire q from a: CNP after CE", "no"), ("probe x", "no answer")]));
        let v = p.judge("s", &obs(&[("wire q from a: CNP after CE", "yes"), ("probe x", "no answer"), ("new", "1")])).unwrap();
        assert_eq!(v.len(), 2, "one verdict per recorded observation");
        let cnp = v.iter().find(|v| v.what.contains("CNP")).unwrap();
        assert!(!cnp.pass && cnp.expected == "no" && cnp.actual == "yes");
        assert!(v.iter().find(|v| v.what.contains("probe x")).unwrap().pass);
        let missing = p.judge("s", &obs(&[])).unwrap();
        assert!(missing.iter().all(|v| !v.pass && v.actual == "not seen in this run"));
        assert!(p.judge("other", &obs(&[])).is_none());
    }

    #[test]
    fn a_bad_profile_says_where() {
        let d = std::env::temp_dir().join(format!("roce-profile-{}.toml", std::process::id()));
        std::fs::write(&d, "name = \"x\"\n[scenario.s]\nk = 3\n").unwrap();
        let e = format!("{:#}", Profile::load(&d).unwrap_err());
        std::fs::remove_file(&d).unwrap();
        assert!(e.contains("not a roce profile") && e.contains("line 3"), "{e}");
    }
}
