//! The seed scenarios, run for real: `roce run scenarios/` against the lab, with
//! the JSON and JUnit reports checked. Needs the VM image, so it only runs with
//! `ROCE_LAB=1` (scripts/test.sh sets it after `roce lab build`).
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn enabled() -> bool {
    if std::env::var("ROCE_LAB").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("scenario lab tests skipped: set ROCE_LAB=1 to run them (they need `roce lab build` first)");
    false
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

struct Lab(String);

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_roce")).args(["lab", "--name", &self.0, "down"]).status();
    }
}

#[test]
fn seed_scenarios_pass_in_the_lab() {
    if !enabled() {
        return;
    }
    let lab = Lab(format!("scen-{}", std::process::id()));
    let out_dir = std::env::temp_dir().join(format!("roce-scenarios-{}", std::process::id()));
    let json = out_dir.join("report.json");
    let junit = out_dir.join("junit.xml");
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(["run", "--lab", &lab.0, "--out"])
        .arg(&out_dir)
        .arg("--json")
        .arg(&json)
        .arg("--junit")
        .arg(&junit)
        .arg(repo().join("scenarios"))
        .output()
        .expect("running roce run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "every seed scenario passes in the lab");

    let report: Value = serde_json::from_slice(&std::fs::read(&json).expect("JSON report written")).expect("JSON report parses");
    let scenarios = report["scenarios"].as_array().expect("scenarios array");
    let files: Vec<_> = std::fs::read_dir(repo().join("scenarios"))
        .expect("scenarios/")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "toml"))
        .collect();
    assert_eq!(scenarios.len(), files.len(), "one result per scenario file");
    for s in scenarios {
        let name = s["name"].as_str().unwrap_or("?");
        let verdicts = s["verdicts"].as_array().expect("verdicts");
        assert!(!verdicts.is_empty(), "{name}: a scenario without expectations proves nothing");
        assert!(verdicts.iter().all(|v| v["pass"] == true), "{name}: {s:#}");
        // The capture of each scenario is kept next to the report.
        if let Some(cap) = s["capture"].as_str() {
            assert!(Path::new(cap).exists(), "{name}: capture {cap} kept");
        }
    }
    let xml = std::fs::read_to_string(&junit).expect("JUnit report written");
    assert!(xml.contains("<testsuite") && xml.contains(&format!("tests=\"{}\"", files.len())), "{xml}");
    assert!(xml.contains("failures=\"0\""), "{xml}");

    // The loopback case says why its wire is empty.
    let loopback = scenarios.iter().find(|s| s["file"].as_str().is_some_and(|f| f.contains("loopback"))).expect("loopback scenario");
    assert!(loopback.to_string().contains("same rxe device"), "{loopback:#}");
    let _ = std::fs::remove_dir_all(&out_dir);
}
