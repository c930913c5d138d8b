//! `roce suite`: a regression suite run. It is `roce run` over a directory of
//! scenarios (optionally held to a device profile) that leaves, in its output
//! directory, the full JSON report, the HTML report with ladder diagrams, the
//! captures, and `suite.json`: what passed and what the setup did, without times,
//! addresses or QPNs, sorted, one fact per line — made to be kept and diffed
//! against the next run's (`--baseline`, or `roce diff OLD NEW`) to see what
//! changed with the last driver or firmware.
//!
//! Owns: [`Suite`], its [`Entry`]s, reading it back and [`diff`]. Imports:
//! `super::Report`; nothing else of the crate.
use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{Deviation, Report};

/// One scenario in `suite.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub file: String,
    /// The catalogue rules the scenario names (`spec`); suite.json files from
    /// before it was recorded say none, and read the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spec: Vec<String>,
    pub pass: bool,
    /// Skipped, and why (the device lacks what the scenario needs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The failed expectations: `what: expected …; actual …` (the actual part
    /// may carry times; a changed failure shows as changed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    #[serde(default)]
    pub observations: BTreeMap<String, String>,
    /// The endpoints whose counters were set against the wire: a counter's
    /// observation (`counter a rcvd_pkts`) is compared only where both runs
    /// weighed that endpoint's (a run of scenarios side by side reads none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counted: Vec<String>,
    /// Where the device departed from IBA and passed as profiled: what IBA
    /// says and what the device did (suite.json files from before say none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deviations: Vec<Deviation>,
    /// The wire in its normal form, when the run kept snapshots: two runs on
    /// two setups are compared frame by frame by `roce diff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<String>,
}

/// `suite.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Suite {
    /// Per endpoint: device, kernel, VM: what the run was on.
    pub setup: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    pub passed: usize,
    pub failed: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped: usize,
    /// By scenario name.
    pub scenarios: BTreeMap<String, Entry>,
}

impl Suite {
    pub(crate) fn from_report(r: &Report) -> Suite {
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
                let failed = s
                    .verdicts
                    .iter()
                    .filter(|v| !v.pass)
                    .map(|v| format!("{}: expected {}; actual {}", v.what, v.expected, v.actual))
                    .collect();
                let entry = Entry {
                    file: s.file.clone(),
                    spec: s.spec.clone(),
                    pass: s.pass,
                    skipped: s.skip_reason.clone(),
                    error: s.error.clone(),
                    failed,
                    observations: s.observations.clone(),
                    counted: s
                        .counters
                        .iter()
                        .filter(|(_, c)| c.weighed())
                        .map(|(ep, _)| ep.clone())
                        .collect(),
                    deviations: s.deviations(),
                    wire: s.wire_snapshot.clone(),
                };
                (s.name.clone(), entry)
            })
            .collect();
        Suite {
            setup,
            profile: r.profile.clone(),
            passed: r.passed,
            failed: r.failed,
            skipped: r.skipped,
            scenarios,
        }
    }

    pub(crate) fn load(path: &Path) -> Result<Suite> {
        let b = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_slice(&b).map_err(|e| {
            anyhow::anyhow!("{}: not a suite.json from `roce suite`: {e}", path.display())
        })
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What changed from `old` to `new`, in words, one line per change; empty when
/// nothing did.
pub(crate) fn diff(old: &Suite, new: &Suite) -> Vec<String> {
    let mut out = Vec::new();
    let eps: std::collections::BTreeSet<&String> =
        old.setup.keys().chain(new.setup.keys()).collect();
    for ep in eps {
        let (o, n) = (old.setup.get(ep.as_str()), new.setup.get(ep.as_str()));
        let keys: std::collections::BTreeSet<&String> =
            o.into_iter().chain(n).flat_map(|m| m.keys()).collect();
        for k in keys {
            let (a, b) = (o.and_then(|m| m.get(k.as_str())), n.and_then(|m| m.get(k.as_str())));
            if a != b {
                out.push(format!(
                    "setup: endpoint {ep} {k}: {} → {}",
                    a.map_or("-", |s| s),
                    b.map_or("-", |s| s)
                ));
            }
        }
    }
    if old.profile != new.profile {
        out.push(format!(
            "profile: {} → {}",
            old.profile.as_deref().unwrap_or("none"),
            new.profile.as_deref().unwrap_or("none")
        ));
    }
    let names: std::collections::BTreeSet<&String> =
        old.scenarios.keys().chain(new.scenarios.keys()).collect();
    for name in names {
        match (old.scenarios.get(name.as_str()), new.scenarios.get(name.as_str())) {
            (None, Some(n)) => out.push(format!(
                "+ new: {name} ({})",
                if n.skipped.is_some() {
                    "skipped"
                } else if n.pass {
                    "passes"
                } else {
                    "fails"
                }
            )),
            (Some(_), None) => out.push(format!("- gone: {name}")),
            (Some(o), Some(n)) => {
                let mut lines = Vec::new();
                let keys: std::collections::BTreeSet<&String> =
                    o.observations.keys().chain(n.observations.keys()).collect();
                // A counter one of the runs did not weigh is no change.
                let weighed = |k: &str| {
                    super::counter_key_endpoint(k)
                        .is_none_or(|ep| [o, n].iter().all(|e| e.counted.iter().any(|c| c == ep)))
                };
                for k in keys.into_iter().filter(|k| weighed(k)) {
                    let (a, b) = (o.observations.get(k.as_str()), n.observations.get(k.as_str()));
                    if a != b {
                        lines.push(format!(
                            "    {k}: {} → {}",
                            a.map_or("(not seen)", |s| s),
                            b.map_or("(not seen)", |s| s)
                        ));
                        // Where it deviates (on either side): what IBA says
                        // and what the device did, when that run kept it.
                        let what = k.strip_prefix("deviation: ");
                        let kept = [(n, b), (o, a)].into_iter().find_map(|(e, v)| {
                            (v.map(String::as_str) == Some("deviates"))
                                .then(|| {
                                    e.deviations.iter().find(|d| Some(d.what.as_str()) == what)
                                })
                                .flatten()
                        });
                        if let Some(d) = kept {
                            lines.push(format!("      IBA: {}; this device: {}", d.iba, d.device));
                        }
                    }
                }
                for f in n.failed.iter().filter(|f| !o.failed.contains(f)) {
                    lines.push(format!("    now fails: {f}"));
                }
                if let (Some(a), Some(b)) = (&o.wire, &n.wire) {
                    lines.extend(wire_diff(a, b));
                }
                if o.error != n.error {
                    if let Some(e) = &n.error {
                        lines.push(format!("    run stopped: {}", e.lines().next().unwrap_or(e)));
                    }
                }
                let head = match (&o.skipped, &n.skipped, o.pass, n.pass) {
                    (None, Some(why), _, _) => format!("− now skipped: {name} ({why})"),
                    (Some(_), None, _, true) => format!("✓ no longer skipped, passing: {name}"),
                    (Some(_), None, _, false) => format!("✗ no longer skipped, failing: {name}"),
                    (Some(_), Some(_), _, _) if lines.is_empty() => continue,
                    (_, _, true, false) => format!("✗ now failing: {name}"),
                    (_, _, false, true) => format!("✓ now passing: {name}"),
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

/// At most this many changed lines of one scenario's wire are listed.
const WIRE_LINES: usize = 40;

/// How one scenario's wire in its normal form differs from `old` to `new`:
/// nothing when the same; else the changed lines, prefixed `-`/`+`, each group
/// under the QP, direction and list it is in; or, for two forms, that they are
/// not compared.
fn wire_diff(old: &str, new: &str) -> Vec<String> {
    if old == new {
        return Vec::new();
    }
    if old.lines().next() != new.lines().next() {
        return vec!["    wire: kept in two forms (two versions of roce?), not compared".into()];
    }
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = vec!["    wire:".to_string()];
    // Where each line of either text is: the last `qp …`/`other` line above it
    // and the last `requests`/`responses` line.
    let place = |text: &str| -> Vec<String> {
        let (mut head, mut list) = (String::new(), String::new());
        text.lines()
            .map(|l| {
                if l.starts_with("qp ") || l == "other" {
                    head = l.to_string();
                    list.clear();
                } else if l == "  requests" || l == "  responses" {
                    list = l.trim().to_string();
                }
                format!("{head} {list}").trim().to_string()
            })
            .collect()
    };
    let (old_at, new_at) = (place(old), place(new));
    let mut shown = 0;
    let mut more = 0;
    let mut last_place = String::new();
    for op in diff.ops() {
        for c in diff.iter_changes(op) {
            let sign = match c.tag() {
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
                similar::ChangeTag::Equal => continue,
            };
            let at = match (c.new_index(), c.old_index()) {
                (Some(i), _) => new_at.get(i),
                (None, Some(i)) => old_at.get(i),
                (None, None) => None,
            };
            if shown >= WIRE_LINES {
                more += 1;
                continue;
            }
            if let Some(at) = at.filter(|a| **a != last_place) {
                out.push(format!("      {at}"));
                last_place = at.clone();
            }
            out.push(format!("        {sign} {}", c.value().trim()));
            shown += 1;
        }
    }
    if more > 0 {
        out.push(format!("      … and {more} more changed lines"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pass: bool, obs: &[(&str, &str)]) -> Entry {
        Entry {
            file: "s.toml".into(),
            spec: Vec::new(),
            pass,
            skipped: None,
            error: None,
            failed: if pass {
                vec![]
            } else {
                vec!["wire of QP q from a: expected x; actual y".into()]
            },
            observations: obs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            counted: Vec::new(),
            deviations: Vec::new(),
            wire: None,
        }
    }

    fn suite(kernel: &str, s: &[(&str, Entry)]) -> Suite {
        let mut setup = BTreeMap::new();
        setup.insert(
            "a".to_string(),
            [("kernel".to_string(), kernel.to_string())].into_iter().collect(),
        );
        Suite {
            setup,
            profile: None,
            passed: s.iter().filter(|(_, e)| e.pass).count(),
            failed: s.iter().filter(|(_, e)| !e.pass && e.skipped.is_none()).count(),
            skipped: s.iter().filter(|(_, e)| e.skipped.is_some()).count(),
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
    fn a_counter_is_compared_only_where_both_runs_weighed_it() {
        let miscount = [("counter a rcvd_pkts", "device 0, wire 1"), ("probe x", "no answer")];
        let counted = |on: &[&str], obs: &[(&str, &str)]| Entry {
            counted: on.iter().map(|e| e.to_string()).collect(),
            ..entry(true, obs)
        };
        let one = suite("6.1", &[("s", counted(&["a", "b"], &miscount))]);
        // Side by side (-j 4): no counters read, so no counter observation.
        let side = suite("6.1", &[("s", counted(&[], &miscount[1..]))]);
        assert!(diff(&one, &side).is_empty(), "{:?}", diff(&one, &side));
        assert!(diff(&side, &one).is_empty());
        // b's counters read, a's not: a's counter is still not compared.
        let b_only = suite("6.1", &[("s", counted(&["b"], &miscount[1..]))]);
        assert!(diff(&one, &b_only).is_empty());
        // Both weighed a's: the miscount that went away is a change.
        let fixed = suite("6.1", &[("s", counted(&["a", "b"], &miscount[1..]))]);
        let text = diff(&one, &fixed).join("\n");
        assert!(text.contains("counter a rcvd_pkts: device 0, wire 1 → (not seen)"), "{text}");
        // An observation that is not a counter's is compared as ever.
        let probe = suite("6.1", &[("s", counted(&[], &[("probe x", "ACK")]))]);
        assert!(diff(&side, &probe).join("\n").contains("probe x: no answer → ACK"));
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
        assert!(
            text.contains("~ changed: ce\n    wire q from a: CNP after CE: no → yes"),
            "{text}"
        );
        assert!(text.contains("✗ now failing: ahead\n    probe ahead: NAK PSN Sequence Error (PSN next) → no answer\n    now fails: wire"), "{text}");
        assert!(text.contains("✓ now passing: rnr"), "{text}");
        assert!(
            text.contains("+ new: new only (passes)") && text.contains("- gone: old only"),
            "{text}"
        );
    }

    /// suite.json keeps, for a pass as profiled, what IBA says and what the
    /// device did: from the run's deviation verdicts, and only those.
    #[test]
    fn a_suite_keeps_each_deviation_of_its_run() {
        let r: Report = serde_json::from_value(serde_json::json!({
            "scenarios": [{"name": "big", "file": "b.toml", "pass": true, "status": "passed", "error": null,
                "verdicts": [
                    {"kind": "wire", "what": "wire of QP q from a", "pass": true, "deviation": true,
                     "expected": "NAK Remote Access Error", "actual": "NAK Invalid Request"},
                    {"kind": "memory", "what": "memory b/t", "pass": true, "expected": "x", "actual": "x"}
                ], "capture": null, "duration_s": 0.1, "endpoints": {}, "connections": []}],
            "passed": 1, "failed": 0, "duration_s": 0.1
        }))
        .unwrap();
        let s = Suite::from_report(&r);
        assert_eq!(
            s.scenarios["big"].deviations,
            [Deviation {
                what: "wire of QP q from a".into(),
                iba: "NAK Remote Access Error".into(),
                device: "NAK Invalid Request".into()
            }]
        );
    }

    /// A case that starts (or stops) deviating says what IBA requires and what
    /// the device did, from the run where it deviated.
    #[test]
    fn a_new_deviation_says_what_iba_requires_and_what_the_device_did() {
        let key = "deviation: wire of QP q from a";
        let old = suite("6.1", &[("big", entry(true, &[(key, "holds")]))]);
        let mut dev = entry(true, &[(key, "deviates")]);
        dev.deviations.push(Deviation {
            what: "wire of QP q from a".into(),
            iba: "NAK Remote Access Error".into(),
            device: "NAK Invalid Request".into(),
        });
        let new = suite("6.12", &[("big", dev)]);
        let text = diff(&old, &new).join("\n");
        assert!(
            text.contains("~ changed: big\n    deviation: wire of QP q from a: holds → deviates\n      IBA: NAK Remote Access Error; this device: NAK Invalid Request"),
            "{text}"
        );
        // Back the other way: the old run kept it.
        let text = diff(&new, &old).join("\n");
        assert!(text.contains("deviates → holds\n      IBA: NAK Remote Access Error; this device: NAK Invalid Request"), "{text}");
    }

    /// Two setups' wires for one scenario, compared by the lines that differ,
    /// each under its QP, direction and list: a responder that now answers the
    /// resend with a second ACK, an RNR NAK with another timer. The same wire is
    /// no change; two forms are said as such.
    #[test]
    fn the_wire_of_two_setups_is_compared_line_by_line() {
        let h = "# roce wire snapshot, form 2\n# s\n";
        let one = format!("{h}\nqp q a → b\n  requests\n    SEND Only psn +0\n    SEND Only psn +0\n  responses\n    RNR NAK psn +0 timer 12\n    ACK psn +0\n\nqp q b → a\n  requests\n  responses\n");
        let two = one
            .replace("timer 12", "timer 14")
            .replace("    ACK psn +0\n", "    ACK psn +0\n    ACK psn +0\n");
        let with = |w: &str| Entry { wire: Some(w.to_string()), ..entry(true, &[]) };
        let d = diff(&suite("6.1", &[("s", with(&one))]), &suite("6.12", &[("s", with(&two))]));
        let text = d.join("\n");
        assert!(
            text.contains("~ changed: s\n    wire:\n      qp q a → b responses\n        - RNR NAK psn +0 timer 12\n        + RNR NAK psn +0 timer 14\n        + ACK psn +0"),
            "{text}"
        );
        assert!(!text.contains("b → a"), "{text}");
        let same = diff(&suite("6.1", &[("s", with(&one))]), &suite("6.1", &[("s", with(&one))]));
        assert!(same.is_empty(), "{same:?}");
        let form = diff(
            &suite("6.1", &[("s", with(&one))]),
            &suite("6.1", &[("s", with(&one.replace("form 2", "form 3")))]),
        );
        assert!(form.join("\n").contains("kept in two forms"), "{form:?}");
    }

    /// A scenario the new setup cannot run is said as skipped, not failed; a later
    /// setup that can run it says so.
    #[test]
    fn skips_are_their_own_change() {
        let skipped = Entry {
            pass: false,
            skipped: Some("the device lacks ibv_wr_flush".into()),
            ..entry(false, &[])
        };
        let old = suite("6.12", &[("flush", entry(true, &[("wire q from a: NAKs", "none")]))]);
        let new = suite("6.1", &[("flush", skipped.clone())]);
        let d = diff(&old, &new).join("\n");
        assert!(
            d.contains("− now skipped: flush (the device lacks ibv_wr_flush)")
                && !d.contains("now failing"),
            "{d}"
        );
        let back = diff(&new, &old).join("\n");
        assert!(back.contains("✓ no longer skipped, passing: flush"), "{back}");
        assert!(diff(&new, &new).is_empty());
        let j = serde_json::to_string(&old).unwrap();
        assert!(
            !j.contains("skipped"),
            "nothing skipped, nothing said: files from before read the same: {j}"
        );
    }
}
