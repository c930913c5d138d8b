//! `roce matrix` through the real binary: two small suite.json files (one per
//! setup) give the grid in text and JSON, exit 0 whatever the verdicts; a missing
//! file or one that is not a suite.json is refused naming it, exit 2; a suite.json
//! from before `spec` was recorded still loads (its cases unclassified without
//! the scenarios). No lab needed.
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

fn matrix(dir: &Path, args: &[&str]) -> Output {
    Command::new(ROCE).current_dir(dir).arg("matrix").args(args).output().unwrap()
}

fn suite(kernel: &str, scenarios: Value) -> Value {
    json!({
        "setup": {"a": {"device": "rxe0", "kernel": kernel, "vm": "a"}},
        "passed": 0, "failed": 0,
        "scenarios": scenarios,
    })
}

fn write(dir: &Path, name: &str, v: &Value) {
    std::fs::write(dir.join(name), serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

#[test]
fn two_setups_text_and_json() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "old.json",
        &suite(
            "6.1",
            json!({
                "wrap": {"file": "w.toml", "spec": ["psn.wrap-write"], "pass": true, "observations": {}},
                "flush": {"file": "f.toml", "spec": ["psn.wrap-send"], "pass": false,
                          "skipped": "the device lacks RDMA FLUSH", "observations": {}},
                "old": {"file": "o.toml", "pass": true, "observations": {}},
            }),
        ),
    );
    write(
        d.path(),
        "new.json",
        &suite(
            "6.12",
            json!({
                "wrap": {"file": "w.toml", "spec": ["psn.wrap-write"], "pass": false,
                         "failed": ["wire: expected a; actual b"], "observations": {}},
                "flush": {"file": "f.toml", "spec": ["psn.wrap-send"], "pass": true, "observations": {}},
                "old": {"file": "o.toml", "pass": true, "observations": {}},
            }),
        ),
    );
    let o = matrix(d.path(), &["old.json", "new.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = String::from_utf8(o.stdout.clone()).unwrap();
    assert!(t.contains("[1] 6.1 rxe0  (old.json)\n[2] 6.12 rxe0  (new.json)\n"), "{}", text(&o));
    assert!(t.contains("3 cases, 2 with a verdict that differs"), "{t}");
    assert!(t.lines().any(|l| l.starts_with("≠ wrap") && l.ends_with("pass     FAILS")), "{t}");
    assert!(t.contains("      [1] skipped: the device lacks RDMA FLUSH"), "{t}");
    assert!(t.contains("\nunclassified — ") && t.lines().any(|l| l.starts_with("  old ")), "{t}");
    assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");

    let o = matrix(d.path(), &["--json", "old.json", "new.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["changed"], 2);
    let groups: Vec<&str> =
        j["groups"].as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap()).collect();
    assert_eq!(groups, ["psn", "unclassified"]);
    let wrap =
        j["groups"][0]["rows"].as_array().unwrap().iter().find(|r| r["case"] == "wrap").unwrap();
    assert_eq!(wrap["changed"], true);
    assert_eq!(
        wrap["cells"][1],
        json!({"verdict": "fails", "reason": "wire: expected a; actual b"})
    );

    let page = d.path().join("m.html");
    let o = matrix(d.path(), &["--html", page.to_str().unwrap(), "old.json", "new.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let h = std::fs::read_to_string(&page).unwrap();
    assert!(h.contains(r#"title="the device lacks RDMA FLUSH">skipped</td>"#), "{h}");
}

#[test]
fn bad_input_is_refused_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("notes.json"), "{\"hello\": 1}").unwrap();
    write(d.path(), "ok.json", &suite("6.1", json!({})));
    let o = matrix(d.path(), &["ok.json", "missing.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.json"), "{}", text(&o));
    let o = matrix(d.path(), &["ok.json", "notes.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("notes.json: not a suite.json"),
        "{}",
        text(&o)
    );
    let o = matrix(d.path(), &[]);
    assert_eq!(o.status.code(), Some(2), "no file at all is a usage error: {}", text(&o));
}
