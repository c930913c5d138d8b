//! `roce report --html`: a hand-made `roce run --json` report over a real lab capture
//! (`captures/lab/rc_drop_retransmit.pcapng`: a dropped SEND First, the NAK PSN
//! Sequence Error, go-back-N), rendered and then checked in a real headless browser
//! by `tests/browser/check_ladder.py` (chromium through chromedriver, with
//! python3-selenium; `scripts/setup.sh --test` installs them). No lab needed.
//!
//! The facts the page must show are derived from `roce decode --json` of the same
//! capture, not from the renderer. Pages broken on purpose must fail the check.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

const ROCE: &str = env!("CARGO_BIN_EXE_roce");
const SCENARIO: &str = "Dropped <SEND First> & go-back-N";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A directory of the test's own, removed when it is dropped: when the test ends,
/// passed or failed.
fn tmp(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("roce-html-{name}-")).tempdir().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The capture's RoCE frames, as `roce decode --json` prints them.
fn roce_frames(capture: &Path) -> Vec<Value> {
    let o = Command::new(ROCE).arg("decode").arg("--json").arg(capture).output().unwrap();
    assert!(o.status.success(), "roce decode --json: {}", text(&o));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("roce").is_some())
        .collect()
}

/// What the ladder should call a frame: `SEND First  PSN 8227874`,
/// `NAK PSN Sequence Error  PSN 8227874`, `ACK  PSN 8227877`.
fn label(v: &Value) -> String {
    let r = &v["roce"];
    let name = r["opcode_name"].as_str().unwrap();
    let name = name.split_once(' ').map_or(name, |(_, n)| n);
    let what = match (name, r["aeth"]["type"].as_str()) {
        ("Acknowledge", Some("NAK")) => format!("NAK {}", r["aeth"]["nak"].as_str().unwrap()),
        ("Acknowledge", Some(t)) => t.to_string(),
        _ => name.to_string(),
    };
    format!("{what}  PSN {}", r["bth"]["psn"])
}

/// Debian's python has python3-selenium; `ROCE_TEST_PYTHON` overrides.
fn python() -> String {
    std::env::var("ROCE_TEST_PYTHON").unwrap_or_else(|_| {
        if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" }
            .to_string()
    })
}

fn check(page: &Path, expected: &Value) -> Output {
    let script = root().join("tests/browser/check_ladder.py");
    Command::new(python())
        .arg(&script)
        .arg(page)
        .arg(expected.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} {}: {e}", python(), script.display()))
}

/// Moves the number in attribute `attr` of the first `<tag ` after the arrow of
/// `frame` by `by`: a page broken on purpose.
fn nudge(html: &str, frame: u64, tag: &str, attr: &str, by: f64) -> String {
    let g = html.find(&format!("data-frame=\"{frame}\"")).unwrap();
    let el = g + html[g..].find(&format!("<{tag} ")).unwrap();
    let at = el + html[el..].find(&format!(" {attr}=\"")).unwrap() + attr.len() + 3;
    let end = at + html[at..].find('"').unwrap();
    let v: f64 = html[at..end].parse().unwrap();
    format!("{}{}{}", &html[..at], v + by, &html[end..])
}

fn report(capture: &Path) -> Value {
    let ep = |name: &str, ip: &str, psn: u32| {
        json!({"vm": name, "device": "rxe0", "port": 1, "gid_index": 1, "gid": format!("::ffff:{ip}"), "ip": ip,
               "qps": [{"name": "q", "qpn": 31, "psn": psn, "gid": format!("::ffff:{ip}")}],
               "mrs": [{"name": "buf", "addr": 4096, "len": 4096, "rkey": 1, "lkey": 1}]})
    };
    json!({
        "scenarios": [
            {
                "name": SCENARIO,
                "file": "scenarios/faults/drop_send_first.toml",
                "pass": false,
                "error": null,
                "verdicts": [
                    {"kind": "completion", "what": "completion of wr_id 1 on a", "pass": true,
                     "expected": "IBV_WC_SUCCESS", "actual": "wr_id 1 IBV_WC_SUCCESS IBV_WC_RECV byte_len 4096 at 30.1 ms"},
                    {"kind": "wire", "what": "wire of QP q from b", "pass": false,
                     "expected": "0 retransmissions; go-back-N recovery", "actual": "requests [SEND First, …]; 4 retransmissions <sic>",
                     "detail": "the switch dropped frame 12"}
                ],
                "capture": capture.display().to_string(),
                "duration_s": 1.25,
                "endpoints": {"a": ep("a", "10.0.0.1", 12842093), "b": ep("b", "10.0.0.2", 8227874)},
                "connections": [],
                "faults": ["drop op=send-first nth=1 (from b, QP q)"]
            },
            {
                "name": "Nothing recorded",
                "file": "scenarios/x.toml",
                "pass": true,
                "error": null,
                "verdicts": [],
                "capture": null,
                "duration_s": 0.5,
                "endpoints": {},
                "connections": []
            }
        ],
        "passed": 1,
        "failed": 1,
        "duration_s": 1.8
    })
}

#[test]
#[ignore = "needs chromium, chromedriver and python3-selenium: bash scripts/setup.sh --test"]
fn ladder_of_a_dropped_frame_checked_in_a_real_browser() {
    let dir = tmp("ladder");
    let d = dir.path();
    let capture = root().join("captures/lab/rc_drop_retransmit.pcapng").canonicalize().unwrap();
    let json_path = d.join("results.json");
    std::fs::write(&json_path, serde_json::to_vec_pretty(&report(&capture)).unwrap()).unwrap();
    let page = d.join("report.html");
    let o =
        Command::new(ROCE).arg("report").arg(&json_path).arg("--html").arg(&page).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("2 scenarios (1 passed, 1 failed)"),
        "{}",
        text(&o)
    );

    // What the page must show, from `roce decode --json` of the same capture.
    let frames = roce_frames(&capture);
    let lane = |ip: &Value| match ip.as_str() {
        Some("10.0.0.1") => "a",
        Some("10.0.0.2") => "b",
        other => panic!("an address of no endpoint: {other:?}"),
    };
    let dropped =
        |v: &Value| v["frame"]["comment"].as_str().is_some_and(|c| c.contains("not delivered"));
    let nak = |v: &Value| v["roce"]["aeth"]["type"].as_str().is_some_and(|t| t.contains("NAK"));
    let arrows: Vec<Value> = frames
        .iter()
        .map(|v| {
            let marks = [("dropped", dropped(v)), ("nak", nak(v))];
            let with = |on: bool| -> Vec<&str> { marks.iter().filter(|m| m.1 == on).map(|m| m.0).collect() };
            json!({"frame": v["frame"]["number"], "from": lane(&v["ip"]["src"]), "to": lane(&v["ip"]["dst"]), "label": label(v),
                   "classes": with(true), "not_classes": with(false)})
        })
        .collect();
    let n_dropped = frames.iter().filter(|v| dropped(v)).count();
    let n_nak = frames.iter().filter(|v| nak(v)).count();
    assert_eq!(
        (frames.len(), n_dropped, n_nak),
        (35, 1, 1),
        "the capture is not the one described in captures/lab/README.md"
    );
    let f12 = arrows.iter().find(|a| a["frame"] == 12).unwrap();
    assert_eq!(
        (f12["label"].as_str(), f12["classes"].clone()),
        (Some("SEND First  PSN 8227874"), json!(["dropped"]))
    );
    let expected = json!({
        "passed": 1,
        "failed": 1,
        "scenarios": [
            {"name": SCENARIO, "pass": false, "frames": frames.len(), "lanes": ["a", "b"],
             "failing_verdicts": ["wire of QP q from b"],
             "class_counts": {"dropped": n_dropped, "nak": n_nak, "injected": 0, "held": 0, "bad-icrc": 0, "cnp": 0},
             "arrows": arrows,
             "notes": ["drop op=send-first nth=1 (from b, QP q)", "4 retransmissions <sic>"]},
            {"name": "Nothing recorded", "pass": true, "frames": 0, "notes": ["No capture was recorded"]}
        ]
    });

    let o = check(&page, &expected);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "the browser check failed:\n{out}");
    for want in [
        "check_ladder: OK",
        "self-contained",
        "summary: 1 passed, 1 failed",
        &format!("'{SCENARIO}': FAIL shown"),
        "'Nothing recorded': PASS shown",
        "35 arrows = 35 RoCE frames",
        "every arrow starts on its sender's lane and ends on its receiver's (±2 px); 1 dropped end between the lanes at a ✗",
        "35 labels visible inside the diagram; no label overlaps",
        &format!("'{SCENARIO}' frame 12: b → a 'SEND First  PSN 8227874' [request dropped]"),
        &format!("'{SCENARIO}' frame 16: a → b 'NAK PSN Sequence Error  PSN 8227874' [response nak]"),
        "failing expectations highlighted: wire of QP q from b",
    ] {
        assert!(out.contains(want), "the check did not say {want:?}:\n{out}");
    }

    // Pages broken on purpose fail, saying what is wrong.
    let html = std::fs::read_to_string(&page).unwrap();
    let broken = [
        // An arrow that misses its receiver's lane by 30 px.
        (nudge(&html, 13, "line", "x2", 30.0), "frame 13: ends at x="),
        // The dropped arrow drawn to the lane, as if delivered.
        (nudge(&html, 12, "line", "x2", -230.0), "frame 12: dropped, but ends at x="),
        // A label pushed down onto the next row's.
        (nudge(&html, 14, "text", "y", 20.0), "(frame 14) overlaps"),
        // Two rows swapped in height: out of order.
        (
            nudge(&nudge(&html, 20, "line", "y1", 60.0), 20, "line", "y2", 60.0),
            "not below frame 20",
        ),
    ];
    for (i, (bad, want)) in broken.iter().enumerate() {
        let p = d.join(format!("broken-{i}.html"));
        std::fs::write(&p, bad).unwrap();
        let o = check(&p, &expected);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(1), "a broken page ({want}) passed the check:\n{out}");
        assert!(
            out.contains(want) && out.contains("check_ladder: FAILED"),
            "expected {want:?}:\n{out}"
        );
    }
}

#[test]
fn report_refuses_what_is_not_a_report() {
    let dir = tmp("refuse");
    let d = dir.path();
    let page = d.join("out.html");
    let cases = [
        ("missing.json", None, "cannot read"),
        ("garbage.json", Some("scenarios: 1\n"), "is not JSON"),
        (
            "other.json",
            Some("{\"frames\": []}"),
            "is not a roce run report (missing field `scenarios`",
        ),
    ];
    for (name, content, want) in cases {
        let p = d.join(name);
        if let Some(c) = content {
            std::fs::write(&p, c).unwrap();
        }
        let o = Command::new(ROCE).arg("report").arg(&p).arg("--html").arg(&page).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
        assert!(
            err.contains(&p.display().to_string()) && err.contains(want),
            "{name}: {}",
            text(&o)
        );
        assert!(err.contains("hint: `roce run --json"), "{name}: {}", text(&o));
        assert!(!page.exists(), "{name}: a page was written");
    }
}
