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

/// One case of the browser fixture: its sections, and per setup its suite.json
/// entry (None: not in that suite).
struct Case {
    name: &'static str,
    groups: &'static [&'static str],
    entries: [Option<Value>; 2],
}

/// What a cell must say, from the suite.json entry alone.
fn expected_cell(e: Option<&Value>) -> (String, Option<String>) {
    let Some(e) = e else { return ("absent".into(), Some("not in this suite".into())) };
    if let Some(why) = e.get("skipped").and_then(Value::as_str) {
        return ("skipped".into(), Some(why.into()));
    }
    if e["pass"] != true {
        let failed: Vec<&str> =
            e["failed"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        return ("fails".into(), Some(failed.join("; ")));
    }
    // A suite.json that kept what IBA says and what the device did says both.
    if let Some(said) = e.get("deviations").and_then(Value::as_array).filter(|d| !d.is_empty()) {
        let said: Vec<String> = said
            .iter()
            .map(|d| {
                let f = |k: &str| d[k].as_str().unwrap().to_string();
                format!("{}: IBA: {}; this device: {}", f("what"), f("iba"), f("device"))
            })
            .collect();
        return ("deviates".into(), Some(said.join("; ")));
    }
    let devs: Vec<String> = e["observations"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, v)| k.starts_with("deviation: ") && *v == "deviates")
        .map(|(k, _)| k["deviation: ".len()..].to_string())
        .collect();
    if devs.is_empty() {
        ("pass".into(), None)
    } else {
        ("deviates".into(), Some(format!("deviation recorded: {}", devs.join("; "))))
    }
}

#[test]
#[ignore = "needs chromium: bash scripts/setup.sh --test"]
fn matrix_page_checked_in_a_real_browser() {
    let ok =
        |spec: &[&str]| json!({"file": "x.toml", "spec": spec, "pass": true, "observations": {}});
    let fails = |spec: &[&str], why: &str| json!({"file": "x.toml", "spec": spec, "pass": false, "failed": [why], "observations": {}});
    let skipped = |spec: &[&str], why: &str| json!({"file": "x.toml", "spec": spec, "pass": false, "skipped": why, "observations": {}});
    let deviates = |spec: &[&str]| {
        json!({"file": "x.toml", "spec": spec, "pass": true,
               "observations": {"deviation: wire of QP q from a": "deviates", "deviation: memory": "holds"}})
    };
    let said = |spec: &[&str]| {
        let mut e = deviates(spec);
        e["deviations"] = json!([
            {"what": "wire of QP q from a", "iba": "NAK Invalid Request", "device": "no response"},
            {"what": "completion of wr_id 10 on a", "iba": "IBV_WC_REM_INV_REQ_ERR <&>", "device": "none"}
        ]);
        e
    };
    let (w, p) = (&["psn.wrap-write"][..], &["resp.hdr.pkey-mismatch-dropped"][..]);
    let both = &["psn.wrap-write", "resp.hdr.tver-nonzero-dropped"][..];
    let cases = [
        Case {
            name: "wrap <WRITE> & \"quotes\"",
            groups: &["psn"],
            entries: [Some(ok(w)), Some(fails(w, "wire: expected <a>; actual b"))],
        },
        Case { name: "same everywhere", groups: &["psn"], entries: [Some(ok(w)), Some(ok(w))] },
        Case {
            name: "flush",
            groups: &["resp.hdr"],
            entries: [
                Some(skipped(p, "the device lacks RDMA FLUSH (rxe gained it in Linux 6.2)")),
                Some(ok(p)),
            ],
        },
        Case {
            name: "deviates on both",
            groups: &["resp.hdr"],
            entries: [Some(deviates(p)), Some(deviates(p))],
        },
        Case {
            name: "two sections",
            groups: &["resp.hdr", "psn"],
            entries: [
                Some(fails(both, "memory: expected 1; actual 2")),
                Some(fails(both, "memory: expected 1; actual 2")),
            ],
        },
        Case {
            name: "deviates, IBA and the device said",
            groups: &["resp.hdr"],
            entries: [Some(deviates(p)), Some(said(p))],
        },
        Case { name: "only on the new one", groups: &["psn"], entries: [None, Some(ok(w))] },
        Case {
            name: "names no rule",
            groups: &["unclassified"],
            entries: [Some(ok(&[])), Some(skipped(&[], "no reason at all"))],
        },
    ];
    let d = tempfile::tempdir().unwrap();
    for (i, file) in ["old.json", "new.json"].iter().enumerate() {
        let scenarios: serde_json::Map<String, Value> = cases
            .iter()
            .filter_map(|c| c.entries[i].clone().map(|e| (c.name.to_string(), e)))
            .collect();
        write(
            d.path(),
            file,
            &suite(if i == 0 { "6.1" } else { "6.12" }, Value::Object(scenarios)),
        );
    }
    let mut cells = Vec::new();
    let mut changed = Vec::new();
    for c in &cases {
        let per: Vec<(String, Option<String>)> =
            c.entries.iter().map(|e| expected_cell(e.as_ref())).collect();
        if per.iter().any(|(v, _)| *v != per[0].0) {
            changed.push(c.name);
        }
        for g in c.groups {
            for (i, (v, why)) in per.iter().enumerate() {
                cells.push(
                    json!({"case": c.name, "group": g, "setup": i, "verdict": v, "reason": why}),
                );
            }
        }
    }
    let expected = json!({"setups": 2, "cells": cells, "changed": changed});
    let page = d.path().join("matrix.html");
    let o = matrix(d.path(), &["--html", page.to_str().unwrap(), "old.json", "new.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/browser/check_matrix.py");
    let python = std::env::var("ROCE_TEST_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into());
    let check = |page: &Path| {
        Command::new(&python).arg(&script).arg(page).arg(expected.to_string()).output().unwrap()
    };
    let o = check(&page);
    println!("{}", text(&o));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // Pages broken on purpose must fail the check: a cell showing another
    // verdict, and an unchanged row highlighted.
    let html = std::fs::read_to_string(&page).unwrap();
    let broken = [
        html.replacen(r#"<td class="cell fails" data-setup="1" title="wire: expected &lt;a&gt;; actual b">fails"#,
                      r#"<td class="cell pass" data-setup="1" title="wire: expected &lt;a&gt;; actual b">pass"#, 1),
        html.replacen(r#"<tr class="case" data-case="same everywhere""#, r#"<tr class="case changed" data-case="same everywhere""#, 1),
    ];
    for (i, b) in broken.iter().enumerate() {
        assert_ne!(*b, html, "broken page {i} is the page");
        let p = d.path().join(format!("broken{i}.html"));
        std::fs::write(&p, b).unwrap();
        let o = check(&p);
        assert_eq!(o.status.code(), Some(1), "broken page {i} must fail: {}", text(&o));
    }
}
