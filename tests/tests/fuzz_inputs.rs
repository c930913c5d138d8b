//! The libFuzzer targets' inputs on every `cargo test`, through the same doors
//! (`roce::inputs`) the targets call:
//!
//! - every input a target once crashed, hung or exhausted memory with, kept in
//!   `fuzz/regressions/<target>/` after its fix, runs through its door again with
//!   the target's own checks (no panic, no session from a stranger's handshake,
//!   nothing unsealed passing authentication, a fault rule's text parsing back to
//!   itself, the flow fast path agreeing with the decoder);
//! - what the tree holds that the targets are seeded from is accepted: every
//!   capture reads to its end, every scenario outside `fixtures/` checks (and
//!   each fixture is read as one), every profile loads, every fault rule of the
//!   scenarios parses back to itself, every field name is a filter, the handshake
//!   and message seeds read as what they are.
use std::path::{Path, PathBuf};

use roce::inputs;
use roce_tests::{copy_tree, root, scratch, Scratch};

/// The capture the filter target runs every filter over.
const FILTER_CAPTURE: &str = "captures/malformed.pcap";
/// The scenario the fuzz target's fuzzed fixture is used by (as in
/// `fuzz/src/lib.rs`).
const FIXTURE_USER: &str =
    "name = \"user\"\nuse = [\"../../fixtures/fuzzed.toml\"]\n\n[endpoints.a]\n";

/// The targets, as `fuzz/Cargo.toml` names them.
const TARGETS: &[&str] =
    &["capture", "frame", "filter", "scenario", "fault_rule", "profile", "handshake", "message"];

/// The fuzz target's directory for scenarios (see `fuzz/src/lib.rs`): a copy of
/// `scenarios/fixtures/`, and the scenario two levels down with `fixtures`
/// links above it.
struct Tree {
    _dir: Scratch,
    scenario: PathBuf,
    fixture: PathBuf,
    user: PathBuf,
}

fn tree() -> Tree {
    let dir = scratch();
    let fixtures = dir.join("fixtures");
    copy_tree(&root().join("scenarios/fixtures"), &fixtures);
    let deep = dir.join("a/b");
    std::fs::create_dir_all(&deep).unwrap();
    for link in [dir.join("a/fixtures"), deep.join("fixtures")] {
        std::os::unix::fs::symlink(&fixtures, link).unwrap();
    }
    Tree {
        scenario: deep.join("fuzzed.toml"),
        fixture: fixtures.join("fuzzed.toml"),
        user: deep.join("user.toml"),
        _dir: dir,
    }
}

/// What one fuzz target does with one input, its checks included.
fn run(target: &str, data: &[u8], tree: &Tree, filter_capture: &[u8]) {
    let text = std::str::from_utf8(data).ok();
    match target {
        "capture" => {
            let _ = inputs::capture(data);
        }
        "frame" => inputs::frame(data),
        "filter" => {
            if let Some(t) = text {
                let _ = inputs::filter(t, filter_capture);
            }
        }
        "scenario" => {
            if let Some(t) = text {
                std::fs::write(&tree.fixture, t).unwrap();
                let _ = inputs::scenario(&tree.scenario, t);
                let _ = inputs::scenario(&tree.user, FIXTURE_USER);
            }
        }
        "fault_rule" => {
            if let Some(t) = text {
                if let Ok(rule) = inputs::fault_rule(t) {
                    assert_eq!(inputs::fault_rule(&rule.to_string()).as_ref(), Ok(&rule));
                }
                let _ = inputs::fault_rule_file(t);
            }
        }
        "profile" => {
            if let Some(t) = text {
                let _ = inputs::profile(Path::new("profiles/fuzzed.toml"), t);
            }
        }
        "handshake" => assert!(inputs::handshake(data).is_err(), "a stranger got a session"),
        "message" => {
            let m = inputs::messages(data);
            assert!(!matches!(m.injected, Ok(1..)), "unsealed messages passed: {m:?}");
            if let Ok(n) = m.plain {
                assert_eq!(m.sealed, Ok(n), "sealing changed what was read");
            }
        }
        other => panic!("no fuzz target {other}"),
    }
}

/// The files of `dir`, sorted, without READMEs and dot files.
fn inputs_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        p.is_file() && !name.starts_with('.') && !name.starts_with("README")
    });
    v.sort();
    v
}

#[test]
fn every_kept_crash_input_runs_clean_through_its_target() {
    let regressions = root().join("fuzz/regressions");
    let tree = tree();
    let filter_capture = std::fs::read(root().join(FILTER_CAPTURE)).unwrap();
    for e in std::fs::read_dir(&regressions).unwrap().flatten() {
        let target = e.file_name().to_string_lossy().into_owned();
        if e.path().is_dir() {
            assert!(TARGETS.contains(&target.as_str()), "fuzz/regressions/{target}: no target");
        }
    }
    let mut ran = 0;
    for target in TARGETS {
        let dir = regressions.join(target);
        assert!(dir.is_dir(), "fuzz/regressions/{target}/ is missing");
        for f in inputs_in(&dir) {
            let data = std::fs::read(&f).unwrap();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(target, &data, &tree, &filter_capture)
            }));
            assert!(r.is_ok(), "{} fails its target {target} again", f.display());
            ran += 1;
        }
    }
    eprintln!("{ran} kept crash inputs ran clean");
}

#[test]
fn every_capture_in_the_tree_reads_to_its_end() {
    let captures = roce_tests::captures();
    assert!(captures.len() > 30, "{} captures", captures.len());
    for c in captures {
        let data = std::fs::read(&c).unwrap();
        match inputs::capture(&data) {
            Ok(n) => assert!(n > 0, "{}: no frames", c.display()),
            Err(e) => panic!("{}: {e}", c.display()),
        }
    }
    // And cut short anywhere, an error or fewer frames, never a panic.
    let data = std::fs::read(root().join("captures/rc_send_cm.pcapng")).unwrap();
    let whole = inputs::capture(&data).unwrap();
    for cut in (0..data.len()).step_by(7) {
        if let Ok(n) = inputs::capture(&data[..cut]) {
            assert!(n <= whole, "{n} frames of {cut} bytes, {whole} of the whole");
        }
    }
}

/// Every `*.toml` below `dir`, sorted.
fn tomls(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "toml") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, &mut v);
    v.sort();
    v
}

#[test]
fn every_scenario_checks_and_fixtures_read_as_fixtures() {
    let scenarios = root().join("scenarios");
    let all = tomls(&scenarios);
    let (fixtures, own): (Vec<_>, Vec<_>) =
        all.iter().partition(|p| p.components().any(|c| c.as_os_str() == "fixtures"));
    assert!(
        own.len() > 50 && fixtures.len() > 10,
        "{} scenarios, {} fixtures",
        own.len(),
        fixtures.len()
    );
    let mut rules = 0;
    for s in &own {
        let text = std::fs::read_to_string(s).unwrap();
        match inputs::scenario(s, &text) {
            Ok(n) => assert!(n >= 1, "{}: no scenario", s.display()),
            Err(e) => panic!("{} does not check:\n{e}", s.display()),
        }
        // Every fault rule a scenario gives reads back as itself.
        let doc: toml::Table = text.parse().unwrap();
        let faults = doc.get("fault").and_then(|f| f.as_array()).cloned().unwrap_or_default();
        for rule in faults.iter().filter_map(|f| f.get("rule")?.as_str()) {
            let r = inputs::fault_rule(rule).unwrap_or_else(|e| panic!("{}: {e}", s.display()));
            assert_eq!(inputs::fault_rule(&r.to_string()), Ok(r));
            rules += 1;
        }
    }
    assert!(rules > 10, "{rules} fault rules in the scenarios");
    // A fixture as the fuzz target reads it: used by a scenario of its own. One
    // that needs what another fixture or its user says is refused, never a panic;
    // one that stands alone is taken.
    let tree = tree();
    for f in &fixtures {
        std::fs::write(&tree.fixture, std::fs::read(f).unwrap()).unwrap();
        let r = inputs::scenario(&tree.user, FIXTURE_USER);
        if f.ends_with("fixtures/rc_q.toml") {
            assert_eq!(r, Ok(1), "{}", f.display());
        }
    }
    // And the same text as the target's scenario path: `use` resolves there.
    let one = own.iter().find(|p| std::fs::read_to_string(p).unwrap().contains("../../fixtures/"));
    let one = one.expect("a scenario two levels down that uses fixtures");
    assert!(inputs::scenario(&tree.scenario, &std::fs::read_to_string(one).unwrap()).is_ok());
    // What the target can name in `use` and must not wait on or read forever.
    for dev in ["/dev/zero", "/dev/null", "/"] {
        let text = format!("name = \"x\"\nuse = [\"{dev}\"]\n");
        let e = inputs::scenario(&tree.scenario, &text).unwrap_err();
        assert!(e.contains("cannot read the fixture"), "{dev}: {e}");
    }
}

#[test]
fn every_profile_loads() {
    let mut n = 0;
    for p in tomls(&root().join("profiles")) {
        let text = std::fs::read_to_string(&p).unwrap();
        let scenarios = inputs::profile(&p, &text).unwrap_or_else(|e| panic!("{e}"));
        assert!(scenarios > 0, "{}: no scenario", p.display());
        n += 1;
    }
    assert!(n >= 2);
    let e = inputs::profile(Path::new("p.toml"), "name = 1").unwrap_err();
    assert!(e.contains("not a roce profile"), "{e}");
}

#[test]
fn every_field_name_is_a_filter_and_bad_ones_are_refused() {
    let capture = std::fs::read(root().join(FILTER_CAPTURE)).unwrap();
    let mut kept_any = false;
    for (_, name, _) in dissector::fields::Field::ALL {
        let kept = inputs::filter(name, &capture).unwrap_or_else(|e| panic!("{name}: {e}"));
        kept_any |= kept > 0;
    }
    assert!(kept_any);
    assert!(inputs::filter("infiniband", &capture).unwrap() > 0);
    let e = inputs::filter("infiniband.bth.destqpn == 5", &capture).unwrap_err();
    assert!(e.contains("-Y") && e.contains('^'), "rendered with its caret: {e}");
}

#[test]
fn handshake_and_message_seeds_read_as_what_they_are() {
    let hs = inputs::handshake_seeds();
    assert!(hs.len() >= 4);
    for s in &hs {
        // No session without the agent's nonce; a challenge alone waits for
        // the proof, a proof made for another nonce is refused.
        let e = inputs::handshake(s).unwrap_err();
        assert!(
            e.contains("closed the connection") || e.contains("closed during") || e.contains("key"),
            "{e}"
        );
    }
    assert!(inputs::handshake(b"\0\0\x10\0").unwrap_err().contains("at most"));
    assert!(inputs::handshake(b"\0\0\0\x02{}").unwrap_err().contains("challenge"));

    let msgs = inputs::message_seeds();
    let (all, one_each) = msgs.split_last().unwrap();
    for m in one_each {
        let r = inputs::messages(m);
        assert_eq!(r.plain, Ok(1), "{:?}", String::from_utf8_lossy(m));
        assert_eq!(r.sealed, Ok(1));
        assert!(r.injected.is_err(), "a plain frame is no authenticated one");
    }
    let r = inputs::messages(all);
    assert_eq!(r.plain, Ok(one_each.len()));
    assert_eq!(r.sealed, Ok(one_each.len()));
    // A frame larger than the protocol's limit ends the stream.
    assert!(inputs::messages(&[0x7f, 0, 0, 0]).plain.is_err());
}
