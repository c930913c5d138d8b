//! The HTML report: escaping, the ladder, windows, marks and the page's parts.
use super::ladder::*;
use super::*;
use crate::judge::timeline::MAX_ROWS;

fn render(r: &Report) -> String {
    render_page(r, None, &|_| None).0
}
use crate::results::Verdict;

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../captures/lab").join(name)
}

fn result(capture: Option<String>) -> ScenarioResult {
    serde_json::from_value(serde_json::json!({
        "name": "<script>alert(1)</script> & \"co\"",
        "file": "x'.toml",
        "pass": false,
        "error": null,
        "verdicts": [],
        "capture": capture,
        "duration_s": 0.5,
        "endpoints": {},
        "connections": []
    }))
    .unwrap()
}

/// A saved `--json` report reads back into the same report, field for field.
#[test]
fn a_saved_report_reads_back_unchanged() {
    let saved = serde_json::json!({
        "scenarios": [{
            "name": "n", "file": "f.toml", "pass": false, "error": "VM b went away",
            "verdicts": [
                {"kind": "wire", "what": "w", "pass": false, "expected": "e", "actual": "a", "detail": "d"},
                {"kind": "memory", "what": "m", "pass": true, "expected": "e", "actual": "a"}
            ],
            "capture": "roce-runs/1/f.pcapng", "duration_s": 1.5,
            "agent_logs": {"a": "said this"},
            "endpoints": {"a": {"vm": "a", "device": "rxe0", "port": 1, "gid_index": 1, "gid": "::ffff:10.0.0.1", "ip": "10.0.0.1",
                "qps": [{"name": "q", "qpn": 17, "psn": 100, "gid": "::ffff:10.0.0.1", "qkey": null}],
                "mrs": [{"name": "m", "addr": 4096, "len": 64, "rkey": 5, "lkey": 6}]}},
            "connections": [{"qp": "q", "endpoint": "a",
                "local": {"name": "q", "qpn": 17, "psn": 100, "gid": "g", "qkey": null},
                "remote": {"name": "q", "qpn": 18, "psn": 200, "gid": "h", "qkey": 7},
                "peer_mrs_from_cm": 2}],
            "faults": ["drop psn=101 nth=1 (from a, QP q)"]
        }],
        "passed": 0, "failed": 1, "duration_s": 2.0
    });
    /// Every field of `a` is in `b`, the same (`b` may have newer fields).
    fn within(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        use serde_json::Value::{Array, Object};
        match (a, b) {
            (Object(x), Object(y)) => x.iter().all(|(k, v)| y.get(k).is_some_and(|w| within(v, w))),
            (Array(x), Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(v, w)| within(v, w))
            }
            _ => a == b,
        }
    }
    let r: Report = serde_json::from_value(saved.clone()).unwrap();
    let again = serde_json::to_value(&r).unwrap();
    assert!(within(&saved, &again), "{saved:#}\nread back as\n{again:#}");
    // Reports written before `faults` existed still read.
    let mut old = saved.clone();
    old["scenarios"][0].as_object_mut().unwrap().remove("faults");
    let r: Report = serde_json::from_value(old).unwrap();
    assert!(r.scenarios[0].faults.is_empty());
}

#[test]
fn escapes_text_from_scenarios_and_captures() {
    let r = Report::new(vec![result(None)], 1.0, None);
    let page = render(&r);
    assert!(!page.contains("<script>alert"), "scenario text reached the page unescaped");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;co&quot;"));
    assert!(
        page.contains("data-name=\"&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;co&quot;\"")
    );
    assert!(!page.contains("src=") && !page.contains("href=\"http"), "the page fetches nothing");
}

#[test]
fn a_missing_capture_is_a_note_not_a_panic() {
    let r =
        Report::new(vec![result(None), result(Some("/nonexistent/x.pcapng".into()))], 1.0, None);
    let (page, notes) = render_page(&r, None, &|_| None);
    assert!(page.contains("No capture was recorded for this scenario"));
    assert!(page.contains("The capture /nonexistent/x.pcapng could not be read"));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(!page.contains("class=\"arrow"));
}

/// The ladder draws the same timeline the judge reads: a rung's flags are the
/// packet's, its label the judge's name for it.
#[test]
fn rungs_are_the_timelines_packets() {
    let w = timeline::read(&capture("rc_drop_retransmit.pcapng")).unwrap();
    let rung = |n| Rung(w.packets.iter().find(|p| p.number == n).unwrap());
    let r12 = rung(12);
    assert_eq!(r12.label(), "SEND First  PSN 8227874");
    assert!(r12.flags().iter().any(|f| f.0 && f.1 == "dropped"));
    assert_eq!(r12.marks(), ["✗ dropped by the lab switch"]);
    assert_eq!(rung(16).label(), "NAK PSN Sequence Error  PSN 8227874");
    assert!(rung(16).flags().iter().any(|f| f.0 && f.1 == "nak"));
    assert_eq!(rung(21).label(), "ACK  PSN 8227877");
    assert!(rung(21).marks().is_empty());
    let cm = timeline::read(&capture("write_bw_rdma_cm.pcapng")).unwrap();
    assert!(cm.packets.iter().any(|p| Rung(p).label() == "CM REQ"));
    // The switch's new mark: a frame changed on the way says so, and what.
    let ce = timeline::read(&capture("rc_ce_mark.pcapng")).unwrap();
    let marked = ce.packets.iter().find(|p| p.marks.modified()).expect("the CE-marked frame");
    assert!(
        Rung(marked).marks().iter().any(|m| m == "changed by the switch: ECN set to CE"),
        "{:?}",
        Rung(marked).marks()
    );
    assert!(Rung(marked).flags().iter().any(|f| f.0 && f.1 == "modified"));
}

/// A NAK Invalid RD Request (0x64) is labelled and marked like every NAK, by
/// the dissector's name for it.
#[test]
fn a_nak_0x64_rung() {
    let w = timeline::read(&capture("rc_drop_retransmit.pcapng")).unwrap();
    let mut p = w.packets.iter().find(|p| p.number == 16).unwrap().clone();
    p.ack = Some(dissector::wire::Syndrome(0x64).kind());
    let r = Rung(&p);
    assert_eq!(r.label(), "NAK Invalid RD Request  PSN 8227874");
    assert!(
        r.flags().iter().any(|f| f.0 && f.1 == "nak")
            && !r.flags().iter().any(|f| f.0 && f.1 == "rnr")
    );
}

/// A result whose endpoints are the lab's two VMs, without QPs.
fn between_a_and_b() -> ScenarioResult {
    let mut s = result(Some("x".into()));
    s.endpoints = serde_json::from_value(serde_json::json!({
        "a": {"vm": "a", "device": "rxe0", "port": 1, "gid_index": 1, "gid": "::ffff:10.0.0.1", "ip": "10.0.0.1", "qps": [], "mrs": []},
        "b": {"vm": "b", "device": "rxe0", "port": 1, "gid_index": 1, "gid": "::ffff:10.0.0.2", "ip": "10.0.0.2", "qps": [], "mrs": []}
    }))
    .unwrap();
    s
}

/// A response the switch synthesized starts between the lanes at a ◆ and says
/// so; the real answer it withheld ends at a ✗ that says it was withheld.
#[test]
fn synthesized_and_withheld_rungs() {
    let w = timeline::read(&capture("requester_nak_psn_seq.pcapng")).unwrap();
    let s = between_a_and_b();
    let mut page = String::new();
    ladder(&mut page, &s, &w);
    let arrow = |frame: u64| -> &str {
        let at = page
            .find(&format!("data-frame=\"{frame}\""))
            .unwrap_or_else(|| panic!("frame {frame} drawn"));
        let start = page[..at].rfind("<g ").unwrap();
        &page[start..start + page[start..].find("</g>").unwrap()]
    };
    let (synth, withheld, request) = (arrow(13), arrow(14), arrow(12));
    assert!(
        synth.contains("class=\"arrow response synthesized nak\"")
            && synth.contains("<path class=\"origin\""),
        "{synth}"
    );
    assert!(
        synth.contains("◆ synthesized by the lab switch: the responder never sent it"),
        "{synth}"
    );
    assert!(
        withheld.contains("dropped")
            && withheld.contains("✗ withheld by the lab switch, which answered instead"),
        "{withheld}"
    );
    assert!(!request.contains("synthesized") && !request.contains("origin"));
    // The synthesized shaft starts where the dropped one ends: halfway.
    let x = |a: &str, attr: &str| -> f64 {
        let i = a.find("class=\"shaft\"").unwrap();
        let v = &a[i..];
        let at = v.find(&format!("{attr}=\"")).unwrap() + attr.len() + 2;
        v[at..at + v[at..].find('"').unwrap()].parse().unwrap()
    };
    assert_eq!(x(synth, "x1"), x(withheld, "x2"));
    assert!(
        page.contains("◆ synthesized by the switch (the responder never sent it)"),
        "the legend"
    );
}

/// A capture longer than one ladder: windows around its first anomalies,
/// overlapping ones merged, at most [`WINDOWS`]; with no anomaly, the run's
/// first frames.
#[test]
fn long_captures_get_windows_around_their_anomalies() {
    let w = timeline::read(&capture("rc_drop_retransmit.pcapng")).unwrap();
    let ack = w.packets.iter().find(|p| p.response_name() == "ACK").unwrap().clone();
    let nak =
        w.packets.iter().find(|p| p.response_name() == "NAK PSN Sequence Error").unwrap().clone();
    let s = between_a_and_b();

    // The real run (a drop, its NAK and the resends) then quiet ACKs: one window.
    let mut long = w.clone();
    long.packets.extend(std::iter::repeat_n(ack.clone(), MAX_ROWS));
    let mut page = String::new();
    ladder(&mut page, &s, &long);
    assert!(
        page.contains(&format!("{} RoCE frames, more than one ladder shows", long.packets.len())),
        "{page:.400}"
    );
    assert_eq!(
        page.matches("<h4 class=\"window\"").count(),
        1,
        "the drop, the NAK and the resends are one window"
    );
    assert!(
        page.contains("data-frame=\"12\"")
            && page.contains("(frame 12: ✗ dropped by the lab switch)"),
        "the first anomaly is the drop of frame 12"
    );
    let arrows = page.matches("<g class=\"arrow").count();
    assert!(arrows > 0 && arrows < WINDOW_BEFORE + WINDOW_AFTER + w.packets.len(), "{arrows}");

    // NAKs every 100 frames: six windows, apart.
    let mut spaced = Timeline::default();
    for i in 0..(MAX_ROWS + 1000) {
        let mut p = if i % 100 == 50 { nak.clone() } else { ack.clone() };
        p.number = i as u64 + 1;
        spaced.packets.push(p);
    }
    let windows = anomaly_windows(&spaced.packets);
    assert_eq!(windows.len(), WINDOWS);
    assert_eq!(windows[0].0, 38..78);
    assert!(windows.windows(2).all(|w| w[0].0.end <= w[1].0.start));
    assert_eq!(windows[1].1, "frame 151: NAK PSN Sequence Error");

    // A NAK every 10 frames (a storm): windows of at most WINDOW_MAX frames,
    // back to back, never overlapping.
    let mut storm = spaced.clone();
    for (i, p) in storm.packets.iter_mut().enumerate() {
        *p = if i % 10 == 5 { nak.clone() } else { ack.clone() };
        p.number = i as u64 + 1;
    }
    let windows = anomaly_windows(&storm.packets);
    assert_eq!(windows.len(), WINDOWS);
    assert!(windows.iter().all(|(r, _)| r.len() <= WINDOW_MAX + WINDOW_AFTER), "{windows:?}");
    assert!(windows.windows(2).all(|w| w[0].0.end <= w[1].0.start), "{windows:?}");

    // Nothing wrong anywhere: the first MAX_ROWS frames, said so.
    let quiet = Timeline { packets: vec![ack; MAX_ROWS + 5], ..Default::default() };
    let mut page = String::new();
    ladder(&mut page, &s, &quiet);
    assert!(page.contains("no anomaly"), "{page:.300}");
    assert_eq!(page.matches("<g class=\"arrow").count(), WINDOW_BEFORE + WINDOW_AFTER);
}

#[test]
fn frames_of_no_endpoint_are_a_note() {
    let mut s = result(Some(capture("rc_drop_retransmit.pcapng").display().to_string()));
    s.verdicts.push(Verdict {
        kind: VerdictKind::Wire,
        what: "wire of QP q from b".into(),
        pass: false,
        expected: "x".into(),
        actual: "y".into(),
        detail: None,
        deviation: false,
        observation: None,
    });
    s.endpoints = serde_json::from_value(serde_json::json!({
        "a": {"vm": "a", "device": "rxe0", "port": 1, "gid_index": 1, "gid": "::ffff:10.0.0.1", "ip": "10.0.0.1",
              "qps": [{"name": "q", "qpn": 31, "psn": 1, "gid": "::ffff:10.0.0.1"}], "mrs": []},
        "c": {"vm": null, "device": "rxe0", "port": 1, "gid_index": 1, "gid": "::ffff:10.0.0.9", "ip": "10.0.0.9", "qps": [], "mrs": []}
    }))
    .unwrap();
    let page = render(&Report::new(vec![s], 1.0, None));
    assert!(page.contains("are not between two endpoints of this scenario"));
    assert!(!page.contains("class=\"arrow"));
    assert!(page.contains("class=\"failing-wire\""));
}

/// A changed wire is drawn as two ladders, kept and this run's, row against
/// row: the frame taken out red on the left, the one put in green on the
/// right, each arrow from its sender to its receiver, headed by its QP and list.
#[test]
fn a_changed_wire_is_drawn_before_and_after() {
    let kept = "# form\n# t\n\nqp q a → b\n  requests\n    SEND Only                      psn +0 A len 4\n  responses\n    ACK                            psn +0 msn 1\n";
    let now = "# form\n# t\n\nqp q a → b\n  requests\n    SEND Only                      psn +0 A len 4\n  responses\n    RNR NAK                        psn +0 timer 14 msn 0\n    ⟳ the line above, repeated\n";
    let mut r = result(None);
    r.wire_kept = Some(kept.into());
    r.wire_snapshot = Some(now.into());
    let page = render(&Report::new(vec![r.clone()], 1.0, None));
    let table = &page[page.find("<table class=\"wire-diff\">").expect("drawn")..];
    let table = &table[..table.find("</table>").unwrap()];
    // Headed by where its first row is; the list it moves into is a row.
    assert!(table.contains("<td colspan=\"2\">qp q a → b · requests</td>"), "{table}");
    assert!(table.contains("<div class=\"part\">responses</div>"), "{table}");
    let replaced = &table[table.find("<tr class=\"replace\">").expect("a replaced row")..];
    let replaced = &replaced[..replaced.find("</tr>").unwrap()];
    assert!(
        replaced.contains(r#"<td class="kept"><div class="rung rtl" data-from="b" data-to="a""#)
            && replaced.contains(">ACK psn +0 msn 1<")
            && replaced.contains(">RNR NAK psn +0 timer 14 msn 0<"),
        "{replaced}"
    );
    let inserted = &table[table.find("<tr class=\"insert\">").expect("an inserted row")..];
    assert!(
        inserted.starts_with(
            r#"<tr class="insert"><td class="kept"></td><td class="now"><div class="fold">⟳"#
        ),
        "{inserted}"
    );
    // The unchanged request is context, drawn left to right on both sides.
    assert!(
        table.contains(
            r#"<tr class="equal"><td class="kept"><div class="rung ltr" data-from="a" data-to="b""#
        ),
        "{table}"
    );
    // No change, or nothing kept: no drawing.
    r.wire_kept = None;
    assert!(!render(&Report::new(vec![r], 1.0, None)).contains("wire-diff\""));
}

/// A pass that holds only as profiled is marked in the list and in its section,
/// with what IBA says and what the device did; one that follows IBA is not.
#[test]
fn a_pass_as_profiled_is_marked_apart_from_one_that_follows_iba() {
    let passed = |name: &str| ScenarioResult {
        name: name.into(),
        pass: true,
        status: crate::results::Status::Passed,
        ..result(None)
    };
    let mut dev = passed("dev");
    dev.verdicts = vec![Verdict {
        kind: VerdictKind::Wire,
        what: "wire of QP q from a".into(),
        pass: true,
        expected: "NAK Invalid Request".into(),
        actual: "no response".into(),
        detail: None,
        deviation: true,
        observation: None,
    }];
    let follows = passed("follows");
    let page = render(&Report::new(vec![dev, follows], 1.0, None));
    assert!(page.contains("(1 of them as profiled: deviating from IBA)"), "{page:.2000}");
    assert_eq!(page.matches("≠ as profiled").count(), 1, "one mark in the list");
    assert!(
        page.contains("wire of QP q from a: IBA: NAK Invalid Request; this device: no response")
    );
}

/// The list groups the cases by catalogue chapter and section, in the
/// catalogue's order with the unclassified last, each group with its counts; a
/// section with a failure is open, one without closed; each case's section
/// gives the text of the rules it checks.
#[test]
fn cases_are_grouped_by_chapter_and_section_with_counts() {
    let cat = crate::catalogue::Catalogue::shipped().unwrap();
    let case = |name: &str, spec: &[&str], status: crate::results::Status| ScenarioResult {
        name: name.into(),
        spec: spec.iter().map(|s| s.to_string()).collect(),
        pass: status == crate::results::Status::Passed,
        status,
        ..result(None)
    };
    use crate::results::Status::{Failed, Passed};
    let r = Report::new(
        vec![
            case("none", &[], Passed),
            case("psn ok", &["psn.ahead-one-nak"], Passed),
            case("write ok", &["op.write.places-at-va"], Passed),
            case("psn bad", &["psn.ahead-one-nak", "op.write.places-at-va"], Failed),
        ],
        1.0,
        None,
    );
    let page = render(&r);
    let psn = cat.section(&cat.rule("psn.ahead-one-nak").unwrap().section).unwrap();
    let write = cat.section(&cat.rule("op.write.places-at-va").unwrap().section).unwrap();
    let at = |needle: &str| page.find(needle).unwrap_or_else(|| panic!("{needle} not in the page"));
    let psn_head = format!(
        "<details class=\"section\" open><summary>{} — {} ({}) — 1 passed · 1 failed</summary>",
        psn.id, psn.title, psn.iba
    );
    let write_head = format!(
        "<details class=\"section\"><summary>{} — {} ({}) — 1 passed</summary>",
        write.id, write.title, write.iba
    );
    let unclassified = at("<strong>Unclassified</strong> — 1 passed</summary>");
    // In the catalogue's order, the unclassified last.
    let (p, w) = (at(&psn_head), at(&write_head));
    let psn_first = cat.sections.iter().position(|s| s.id == psn.id)
        < cat.sections.iter().position(|s| s.id == write.id);
    assert_eq!(p < w, psn_first);
    assert!(p < unclassified && w < unclassified);
    // A case with two rules' sections is under its first's.
    let bad = at("✗ psn bad");
    assert!(bad > p && (bad < w || w < p), "under psn");
    // The rules' own text, in the case's section.
    let rule = cat.rule("op.write.places-at-va").unwrap();
    assert!(page.contains(&format!(
        "<code>op.write.places-at-va</code> — {} ",
        maud::html! { (rule.rule) }.into_string()
    )));
    assert_eq!(page.matches("<li data-outcome=\"fail\">").count(), 1);
}
