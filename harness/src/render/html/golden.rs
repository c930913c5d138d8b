//! Golden pages: representative reports, rendered. The small ones are pinned byte
//! for byte in `golden/` (a change to the markup is a diff to review there;
//! `ROCE_BLESS=1` rewrites them); `ROCE_HTML_GOLDEN_DIR=DIR` writes them all,
//! every capture's ladder and long captures' windows too, to diff two renderers.
use super::*;
use crate::judge::timeline::MAX_ROWS;
use serde_json::json;

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../captures").join(name)
}

fn ep(name: &str, ip: &str, psn: u32) -> serde_json::Value {
    json!({"vm": name, "device": "rxe0", "port": 1, "gid_index": 1, "gid": format!("::ffff:{ip}"), "ip": ip,
           "qps": [{"name": "q", "qpn": 31, "psn": psn, "gid": format!("::ffff:{ip}")},
                   {"name": "a-very-long-qp-name-that-goes-on", "qpn": 4660, "psn": 7, "gid": format!("::ffff:{ip}")},
                   {"name": "another-long-qp-name-x", "qpn": 4661, "psn": 8, "gid": format!("::ffff:{ip}")}],
           "mrs": [{"name": "buf", "addr": 4096, "len": 4096, "rkey": 1, "lkey": 1}]})
}

fn pct(p50: u64) -> serde_json::Value {
    json!({"samples": 10, "p50": p50, "p99": p50 * 3, "max": p50 * 7 + 13})
}

fn stream(id: &str, wire: bool) -> serde_json::Value {
    let mut v = json!({"on": "a<b>", "id": id, "verb": "write", "qps": 3, "count": 1000, "posted": 1000,
        "completed": 998, "bytes": 4096000, "elapsed_us": 12345, "latency_us": pct(17), "failed": null, "timed_out": false});
    if wire {
        v["wire"] = json!({"messages": 1000, "acked": 998, "peak_outstanding": 16, "window": 32,
            "ack_latency_ns": pct(12000), "resends": 4, "resend_latency_ns": null, "naks": 2, "rnr_naks": 1,
            "qps": [
                {"qp": "q0<'&\">", "messages": 400, "acked": 399, "peak_outstanding": 8, "ack_latency_ns": pct(9000), "resends": 2, "redundant_resends": 1, "naks": 1, "rnr_naks": 0, "go_back_n": {"broken": 0, "first": null}},
                {"qp": "q1", "messages": 300, "acked": 300, "peak_outstanding": 4, "ack_latency_ns": null, "resends": 0, "naks": 0, "rnr_naks": 0},
                {"qp": "q2", "messages": 300, "acked": 17, "peak_outstanding": 4, "ack_latency_ns": pct(1), "resends": 2, "naks": 1, "rnr_naks": 1, "go_back_n": {"broken": 2, "first": "frame 9: <resend> at 'x' & \"y\""}},
                {"qp": "q3", "messages": 0, "acked": 0, "peak_outstanding": 0, "ack_latency_ns": null, "resends": 0, "naks": 0, "rnr_naks": 0, "go_back_n": {"broken": 1, "first": null}}
            ],
            "plot": {"span_ns": 123456789,
                "slices": [{"at_ns": 0, "p50_ns": 1000, "max_ns": 5000, "messages": 3},
                           {"at_ns": 333333, "p50_ns": 1200, "max_ns": 9999, "messages": 3},
                           {"at_ns": 123456000, "p50_ns": 777, "max_ns": 12345, "messages": 1}],
                "resends": [{"at_ns": 5000, "frame": 12, "what": "NAK <seq> & 'timer'"}],
                "naks": [{"at_ns": 4000, "frame": 11, "what": "NAK PSN \"Sequence\" Error"}]}});
    }
    v
}

fn scenario(name: &str, capture: Option<PathBuf>) -> serde_json::Value {
    json!({"name": name, "file": "scenarios/x'.toml", "pass": false, "error": null, "verdicts": [],
           "capture": capture.map(|c| c.display().to_string()), "duration_s": 0.25, "endpoints": {}, "connections": []})
}

fn rich() -> serde_json::Value {
    let weird = "<b>&'\"\u{1}\u{1b}[31m\ttab\nline</b>";
    let mut s = scenario(weird, Some(capture("lab/rc_drop_retransmit.pcapng")));
    s["error"] = json!(format!("VM went away: {weird}"));
    s["verdicts"] = json!([
        {"kind": "completion", "what": "completion <1>", "pass": true, "expected": "IBV_WC_SUCCESS", "actual": "ok & 'fine'"},
        {"kind": "wire", "what": "wire of QP q from b", "pass": false, "expected": "0 <retrans>", "actual": "4 \"retrans\"", "detail": "detail 'd'"},
        {"kind": "wire", "what": "wire deviation", "pass": false, "expected": "e", "actual": "a", "deviation": true},
        {"kind": "memory", "what": "m", "pass": true, "expected": "e", "actual": "a", "detail": null}
    ]);
    s["endpoints"] =
        json!({"a": ep("a", "10.0.0.1", 12842093), "b<'\">": ep("b", "10.0.0.2", 8227874)});
    s["endpoints"]["b<'\">"]["vm"] = json!(null);
    s["connections"] = json!([{"qp": "q<1>", "endpoint": "a&b",
        "local": {"name": "q", "qpn": 17, "psn": 100, "gid": "g", "qkey": null},
        "remote": {"name": "q", "qpn": 18, "psn": 200, "gid": "h", "qkey": 7}, "peer_mrs_from_cm": 2},
        {"qp": "q2", "endpoint": "b",
        "local": {"name": "q", "qpn": 255, "psn": 1, "gid": "g", "qkey": null},
        "remote": {"name": "q", "qpn": 0, "psn": 2, "gid": "h", "qkey": null}}]);
    s["faults"] = json!(["drop op=send-first nth=1 (from b, QP q)", "delay <x> & 'y'"]);
    s["observations"] = json!({"mtu<": "1024 & 'x'", "gid": "::ffff:10.0.0.1"});
    s["agent_logs"] = json!({"a": "  said <this> & 'that'\n\n", "b": "   \n", "c\"": weird});
    s["streams"] = json!([stream("s<1>", true), stream("s2", false)]);
    s
}

fn between(mut s: serde_json::Value) -> serde_json::Value {
    s["endpoints"] = json!({"a": ep("a", "10.0.0.1", 1), "b": ep("b", "10.0.0.2", 2)});
    s
}

fn report(scenarios: Vec<serde_json::Value>) -> Report {
    let s: Vec<ScenarioResult> =
        scenarios.into_iter().map(|v| serde_json::from_value(v).unwrap()).collect();
    Report::new(s, 3.5, None)
}

/// The pages, by name: `(name, report, wire of scenario i if given)`.
pub(super) fn pages() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut put = |name: &str, r: Report, wires: Wires<'_>| {
        let (page, notes) = render_page(&r, None, wires);
        out.push((format!("{name}.html"), format!("{page}<!-- notes: {notes:?} -->\n")));
    };
    let none: Wires<'_> = &|_| None;
    put("rich", report(vec![rich()]), none);
    let mut skipped = scenario("skipped one", None);
    skipped["status"] = json!("skipped");
    skipped["skip_reason"] = json!("needs <rdma> & 'x'");
    let mut passed = scenario("passed one", None);
    passed["pass"] = json!(true);
    passed["status"] = json!("passed");
    put(
        "mixed",
        report(vec![
            skipped,
            passed,
            scenario("missing", Some("/nonexistent/<x>.pcapng".into())),
            scenario("relative", Some("no/such/file.pcapng".into())),
        ]),
        none,
    );
    put(
        "synth",
        report(vec![between(scenario("synth", Some(capture("lab/requester_nak_psn_seq.pcapng"))))]),
        none,
    );
    put(
        "stray",
        report(vec![{
            let mut s = scenario("stray", Some(capture("lab/rc_drop_retransmit.pcapng")));
            s["endpoints"] = json!({"a": ep("a", "10.0.0.1", 1), "c": ep("c", "10.0.0.9", 2)});
            s
        }]),
        none,
    );
    // Long captures, through the caller's wire.
    let w = timeline::read(&capture("lab/rc_drop_retransmit.pcapng")).unwrap();
    let ack = w.packets.iter().find(|p| p.response_name() == "ACK").unwrap().clone();
    let nak =
        w.packets.iter().find(|p| p.response_name() == "NAK PSN Sequence Error").unwrap().clone();
    let mut long = w.clone();
    long.packets.extend(std::iter::repeat_n(ack.clone(), MAX_ROWS));
    let mut spaced = Timeline::default();
    for i in 0..(MAX_ROWS + 1000) {
        let mut p = if i % 100 == 50 { nak.clone() } else { ack.clone() };
        p.number = i as u64 + 1;
        spaced.packets.push(p);
    }
    let quiet = Timeline { packets: vec![ack; MAX_ROWS + 5], ..Default::default() };
    let mut damaged = w.clone();
    damaged.damaged = Some("truncated <block> & 'x'".into());
    let empty = Timeline::default();
    let ws = [long, spaced, quiet, damaged, empty];
    let names = ["long", "spaced", "quiet", "damaged", "empty"];
    let r = report(names.iter().map(|n| between(scenario(n, Some("x".into())))).collect());
    put("long", r, &|i| ws.get(i).map(Cow::Borrowed));
    // Every capture, its lanes by address.
    let mut all = Vec::new();
    for dir in ["lab", "."] {
        let mut files: Vec<_> = std::fs::read_dir(capture(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
            .collect();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            all.push(scenario(&name, Some(f)));
        }
    }
    put("captures", report(all), none);
    out
}

#[test]
fn write_golden_pages() {
    let Ok(dir) = std::env::var("ROCE_HTML_GOLDEN_DIR") else { return };
    for (name, page) in pages() {
        std::fs::write(Path::new(&dir).join(name), page).unwrap();
    }
}

/// The pinned pages: all but the big ones (every capture, long captures).
const PINNED: [&str; 4] = ["rich.html", "mixed.html", "synth.html", "stray.html"];

/// `page` without what changes with the checkout: the assets (their own files),
/// where the crate is, its version.
fn portable(page: &str) -> String {
    page.replace(CSS, "/* assets/report.css */")
        .replace(JS, "/* assets/report.js */")
        .replace(env!("CARGO_MANIFEST_DIR"), "$HARNESS")
        .replace(&format!("roce {}</footer>", env!("CARGO_PKG_VERSION")), "roce $VERSION</footer>")
}

#[test]
fn pages_are_the_pinned_ones() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/render/html/golden");
    let bless = std::env::var_os("ROCE_BLESS").is_some();
    for (name, page) in pages().into_iter().filter(|(n, _)| PINNED.contains(&n.as_str())) {
        let (page, file) = (portable(&page), dir.join(&name));
        if bless {
            std::fs::write(&file, &page).unwrap();
            continue;
        }
        let pinned = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: {e} (ROCE_BLESS=1 writes it)", file.display()));
        if let Some((i, (a, b))) =
            pinned.lines().zip(page.lines()).enumerate().find(|(_, (a, b))| a != b)
        {
            panic!(
                "{name} differs from {} at line {}:\npinned:   {a:.300}\nrendered: {b:.300}\n\
                 (a change on purpose: ROCE_BLESS=1 rewrites it; review the diff)",
                file.display(),
                i + 1
            );
        }
        assert_eq!(pinned, page, "{name}: the same lines, but not the same page");
    }
}
