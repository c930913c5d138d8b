//! `roce coverage` and `roce check` on the catalogue ids scenarios name, through the
//! real binary: exact numbers on a small scenario directory, a suite.json per
//! setup, an unknown id refused with the closest one, a scenario naming none
//! warned about. No lab needed.
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

const ROCE: &str = env!("CARGO_BIN_EXE_roce");

fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn scenario(dir: &Path, file: &str, name: &str, spec: &[&str]) {
    let spec = if spec.is_empty() {
        String::new()
    } else {
        format!(
            "spec = [{}]\n",
            spec.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ")
        )
    };
    let body = format!(
        "name = \"{name}\"\n{spec}[endpoints.a]\n[endpoints.b]\n[[qp]]\nname = \"q\"\ntype = \"rc\"\nbetween = [\"a\", \"b\"]\n"
    );
    std::fs::write(dir.join(file), body).unwrap();
}

fn coverage(args: &[&str]) -> Output {
    Command::new(ROCE).arg("coverage").args(args).output().unwrap()
}

#[test]
fn two_scenarios_naming_three_rules_cover_exactly_those_three() {
    let d = tempfile::tempdir().unwrap();
    scenario(d.path(), "a.toml", "a", &["roce.udp.dst-port", "psn.wrap-send"]);
    scenario(d.path(), "b.toml", "b", &["psn.wrap-send", "mr.bounds.past-end"]);
    let dir = d.path().to_str().unwrap();

    let o = coverage(&["--scenarios", dir, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let observable = v["observable"].as_u64().unwrap();
    assert!(observable >= 150, "{observable}");
    assert_eq!(v["scenarios"], 2);
    assert_eq!(v["total"]["covered"], 3);
    let want = (1000.0 * 3.0 / observable as f64).round() / 10.0;
    assert_eq!(v["total"]["percent"].as_f64().unwrap(), want);
    let mut covered: Vec<String> = Vec::new();
    let mut sum = 0;
    for ch in v["chapters"].as_array().unwrap() {
        let mut in_chapter = 0;
        for s in ch["sections"].as_array().unwrap() {
            let n = s["covered"].as_u64().unwrap();
            in_chapter += n;
            let uncovered = s["uncovered"].as_array().unwrap().len() as u64;
            assert_eq!(n + uncovered, s["observable"].as_u64().unwrap(), "{s}");
            for r in s["rules"].as_array().unwrap() {
                if !r["scenarios"].as_array().unwrap().is_empty() {
                    covered.push(r["id"].as_str().unwrap().to_string());
                }
            }
        }
        assert_eq!(ch["covered"].as_u64().unwrap(), in_chapter);
        sum += ch["observable"].as_u64().unwrap();
    }
    assert_eq!(sum, observable);
    covered.sort();
    assert_eq!(covered, ["mr.bounds.past-end", "psn.wrap-send", "roce.udp.dst-port"]);
    assert!(v["not_observable"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| !n["reason"].as_str().unwrap().is_empty()));

    // Text: the same numbers.
    let o = coverage(&["--scenarios", dir]);
    assert!(o.status.success(), "{}", text(&o));
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(
        t.contains(&format!("total: 3 of {observable} observable rules covered ({want} %)")),
        "{t}"
    );
    assert!(t.lines().any(|l| l.trim_start().starts_with("psn ") && l.contains("1/15")), "{t}");

    // Per setup: a holds, b deviates (a deviation recorded), a rule named by both
    // takes the worse.
    let suite = json!({
        "setup": {"a": {"device": "rxe0", "kernel": "6.1.0-50-amd64"}},
        "profile": "rxe-linux-6.1",
        "passed": 2, "failed": 0,
        "scenarios": {
            "a": {"file": "a.toml", "pass": true, "observations": {}},
            "b": {"file": "b.toml", "pass": true,
                  "observations": {"deviation: wire of QP q from a": "deviates"}}
        }
    });
    let sj = d.path().join("suite.json");
    std::fs::write(&sj, suite.to_string()).unwrap();
    let skipped = json!({
        "setup": {}, "passed": 0, "failed": 1, "skipped": 1,
        "scenarios": {
            "a": {"file": "a.toml", "pass": false, "skipped": "the device has no FLUSH"},
            "b": {"file": "b.toml", "pass": false, "failed": ["x: expected 1; actual 2"]}
        }
    });
    let sk = d.path().join("other.json");
    std::fs::write(&sk, skipped.to_string()).unwrap();
    let o = coverage(&["--scenarios", dir, "--json", sj.to_str().unwrap(), sk.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["setups"][0];
    assert_eq!(s["setup"], "rxe-linux-6.1");
    assert_eq!(s["rules"]["roce.udp.dst-port"]["verdict"], "holds");
    assert_eq!(s["rules"]["psn.wrap-send"]["verdict"], "deviates");
    assert_eq!(s["rules"]["mr.bounds.past-end"]["verdict"], "deviates");
    assert_eq!(s["counts"]["holds"], 1);
    assert_eq!(s["counts"]["deviates"], 2);
    assert_eq!(s["counts"]["not-run"].as_u64().unwrap(), observable - 3);
    let s = &v["setups"][1];
    assert_eq!(s["rules"]["roce.udp.dst-port"]["verdict"], "skipped");
    assert_eq!(
        s["rules"]["roce.udp.dst-port"]["reasons"][0],
        format!("{}: the device has no FLUSH", d.path().join("a.toml").display())
    );
    assert_eq!(s["rules"]["psn.wrap-send"]["verdict"], "fails");
    let o = coverage(&["--scenarios", dir, sj.to_str().unwrap()]);
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(t.contains("setup rxe-linux-6.1 ("), "{t}");
    assert!(
        t.contains(&format!(
            "  1 holds, 2 deviates, 0 skipped, 0 fails, {} not run",
            observable - 3
        )),
        "{t}"
    );
}

#[test]
fn an_unknown_rule_is_refused_with_the_closest_and_a_scenario_naming_none_is_warned_about() {
    let d = tempfile::tempdir().unwrap();
    scenario(d.path(), "typo.toml", "typo", &["psn.wrap-sned"]);
    let dir = d.path().to_str().unwrap();
    for cmd in [vec!["coverage", "--scenarios", dir], vec!["check", dir]] {
        let o = Command::new(ROCE).args(&cmd).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let e = String::from_utf8_lossy(&o.stderr);
        let file = d.path().join("typo.toml");
        assert!(
            e.contains(&format!(
                "error: unknown catalogue rule `psn.wrap-sned`\n --> {}:2:9\n",
                file.display()
            )),
            "{e}"
        );
        assert!(e.contains("hint: did you mean `psn.wrap-send`?"), "{e}");
    }

    let d = tempfile::tempdir().unwrap();
    scenario(d.path(), "old.toml", "old", &[]);
    let o = Command::new(ROCE).arg("check").arg(d.path()).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains(&format!(
            "warning: the scenario names no rule of the conformance catalogue\n --> {}:1:8\n",
            d.path().join("old.toml").display()
        )),
        "{e}"
    );
    // Only `roce check` says so: coverage counts the scenario, quietly.
    let o = coverage(&["--scenarios", d.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("total: 0 of "));
}
