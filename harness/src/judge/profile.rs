//! Holding a run to a device profile: one verdict per observation the profile
//! recorded for the scenario, failed where this run differs; an observation
//! the run could not make (`judged` says which: a counter not read) is not
//! judged.
//!
//! Owns: [`verdicts`]. Imports: the results' [`Profile`] and verdicts; nothing else.
use std::collections::BTreeMap;

use crate::results::profile::Profile;
use crate::results::{Verdict, VerdictKind};

/// The profile's verdicts on one scenario's observations. `None` when the profile
/// does not know the scenario.
pub(crate) fn verdicts(
    p: &Profile,
    scenario: &str,
    seen: &BTreeMap<String, String>,
    judged: impl Fn(&str) -> bool,
) -> Option<Vec<Verdict>> {
    let want = p.scenario.get(scenario)?;
    Some(
        want.iter()
            .filter(|(k, _)| judged(k))
            .map(|(k, v)| {
                let actual = seen.get(k).cloned().unwrap_or_else(|| "not seen in this run".into());
                Verdict {
                    observation: Some(k.clone()),
                    ..Verdict::new(
                        VerdictKind::Profile,
                        format!("{} profile: {k}", p.name),
                        &actual == v,
                        v.clone(),
                        actual,
                    )
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn deviations_fail_and_unknown_scenarios_are_not_judged() {
        let mut p = Profile { name: "rxe".into(), ..Default::default() };
        p.scenario.insert(
            "s".into(),
            obs(&[("wire q from a: CNP after CE", "no"), ("probe x", "no answer")]),
        );
        let all = |_: &str| true;
        let v = verdicts(
            &p,
            "s",
            &obs(&[("wire q from a: CNP after CE", "yes"), ("probe x", "no answer"), ("new", "1")]),
            all,
        )
        .unwrap();
        assert_eq!(v.len(), 2, "one verdict per recorded observation");
        let cnp = v.iter().find(|v| v.what.contains("CNP")).unwrap();
        assert!(!cnp.pass && cnp.expected == "no" && cnp.actual == "yes");
        assert_eq!(cnp.observation.as_deref(), Some("wire q from a: CNP after CE"));
        assert!(v.iter().find(|v| v.what.contains("probe x")).unwrap().pass);
        let missing = verdicts(&p, "s", &obs(&[]), all).unwrap();
        assert!(missing.iter().all(|v| !v.pass && v.actual == "not seen in this run"));
        assert!(verdicts(&p, "other", &obs(&[]), all).is_none());
        // What the run could not observe is not judged, either way.
        let v = verdicts(&p, "s", &obs(&[]), |k| k != "probe x").unwrap();
        assert_eq!(v.len(), 1);
        assert!(v[0].what.contains("CNP"));
    }
}
