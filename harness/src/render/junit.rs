//! JUnit XML (`roce run --junit`): one testsuite, one testcase per scenario, for
//! CI systems. Written by quick-junit (cargo-nextest's serializer), which escapes
//! every name and message and replaces what XML cannot hold.
//!
//! Owns: [`render`], the mapping from a run's report to JUnit's shape. Imports: the
//! results' report, scenario result and status; quick-junit.
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report as Junit, TestCase, TestCaseStatus, TestSuite};

use crate::results::{Iba, Report, ScenarioResult, Status};

/// JUnit XML: one testsuite, one testcase per scenario; a failed one carries a
/// `<failure>` (its first line as the message, every failed expectation in the
/// text), a skipped one `<skipped>` with the reason.
pub(crate) fn render(r: &Report) -> String {
    let mut suite = TestSuite::new("roce run");
    suite.set_time(seconds(r.duration_s));
    suite.add_test_cases(r.scenarios.iter().map(case));
    let mut report = Junit::new("roce run");
    report.set_time(seconds(r.duration_s));
    report.add_test_suite(suite);
    // Serialising into a String writes to memory, which cannot fail; were it to, the
    // report says so rather than leaving a half-written file.
    report.to_string().unwrap_or_else(|e| {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- JUnit report not written: {e} -->\n"
        )
    })
}

fn case(s: &ScenarioResult) -> TestCase {
    let status = match s.status {
        Status::Passed => TestCaseStatus::success(),
        Status::Skipped => {
            let mut st = TestCaseStatus::skipped();
            st.set_message(s.skip_reason.as_deref().unwrap_or("skipped"));
            st
        }
        Status::Failed => {
            let mut text = String::new();
            if let Some(e) = &s.error {
                text.push_str(&format!("run: {e}\n"));
            }
            for v in s.verdicts.iter().filter(|v| !v.pass) {
                text.push_str(&format!(
                    "{}: expected {}; actual {}\n",
                    v.what, v.expected, v.actual
                ));
                if let Some(d) = &v.detail {
                    text.push_str(&format!("  {d}\n"));
                }
            }
            let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
            st.set_message(text.lines().next().unwrap_or("failed").to_string());
            st.set_description(text);
            st
        }
    };
    let mut c = TestCase::new(s.name.as_str(), status);
    c.set_classname(s.file.as_str());
    c.set_time(seconds(s.duration_s));
    // A pass that holds only as profiled is not a pass that follows IBA: CI
    // dashboards can tell them apart by this property.
    if let Some(iba) = s.iba() {
        let word = match iba {
            Iba::Follows => "follows",
            Iba::Deviates => "deviates",
        };
        c.properties.push(Property::new("iba", word));
        for d in s.deviations() {
            c.properties.push(Property::new("deviation", d.said()));
        }
    }
    c
}

/// A report's seconds as a Duration (a negative or non-finite one, from a
/// hand-edited report, as zero).
fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_counts() {
        let r: Report = serde_json::from_value(serde_json::json!({
            "scenarios": [
                {"name": "ok", "file": "a.toml", "pass": true, "status": "passed", "error": null, "verdicts": [], "capture": null, "duration_s": 0.5, "endpoints": {}, "connections": []},
                {"name": "bad <1>", "file": "b.toml", "pass": false, "error": "VM b went away", "verdicts": [
                    {"kind": "wire", "what": "wire of QP q from a", "pass": false, "expected": "x", "actual": "y"}
                ], "capture": null, "duration_s": 1.0, "endpoints": {}, "connections": []},
                {"name": "flush", "file": "c.toml", "pass": false, "status": "skipped", "skip_reason": "endpoint b: the device lacks ibv_wr_flush", "error": null, "verdicts": [], "capture": null, "duration_s": 0.2, "endpoints": {}, "connections": []}
            ],
            "passed": 1, "failed": 1, "skipped": 1, "duration_s": 1.5
        })).unwrap();
        let x = render(&r);
        assert!(x.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"), "{x}");
        assert!(
            x.contains("<testsuite name=\"roce run\" tests=\"3\" skipped=\"1\" errors=\"0\" failures=\"1\" time=\"1.500\">"),
            "{x}"
        );
        assert!(x.contains("<testcase name=\"flush\" classname=\"c.toml\" time=\"0.200\">\n            <skipped message=\"endpoint b: the device lacks ibv_wr_flush\"/>"), "{x}");
        assert_eq!(x.matches("<failure").count(), 1, "a skip is no failure: {x}");
        assert!(x.contains("<testcase name=\"ok\" classname=\"a.toml\" time=\"0.500\">\n            <properties>\n                <property name=\"iba\" value=\"follows\"/>"), "{x}");
        // A pass that holds only as profiled says so, and where.
        let mut dev = r.clone();
        dev.scenarios[0].verdicts = serde_json::from_value(serde_json::json!([
            {"kind": "wire", "what": "wire of QP q from a", "pass": true, "deviation": true,
             "expected": "NAK Invalid Request", "actual": "no response"}
        ]))
        .unwrap();
        let x = render(&dev);
        assert!(x.contains("<property name=\"iba\" value=\"deviates\"/>\n                <property name=\"deviation\" value=\"wire of QP q from a: IBA: NAK Invalid Request; this device: no response\"/>"), "{x}");
        assert!(
            x.contains("name=\"bad &lt;1&gt;\"")
                && x.contains("<failure message=\"run: VM b went away\">"),
            "{x}"
        );
        assert!(x.contains("wire of QP q from a: expected x; actual y"), "{x}");
    }

    /// What XML cannot hold (control characters from a scenario's name or a
    /// device's error text) never reaches the file.
    #[test]
    fn control_characters_do_not_break_the_xml() {
        let r: Report = serde_json::from_value(serde_json::json!({
            "scenarios": [
                {"name": "bell\u{7} & <tag>", "file": "a.toml", "pass": false, "error": "nul\u{0} \"quoted\"", "verdicts": [], "capture": null, "duration_s": 0.1, "endpoints": {}, "connections": []}
            ],
            "passed": 0, "failed": 1, "skipped": 0, "duration_s": 0.1
        }))
        .unwrap();
        let x = render(&r);
        assert!(!x.contains('\u{7}') && !x.contains('\u{0}'), "{x:?}");
        assert!(x.contains("&amp; &lt;tag&gt;") && x.contains("&quot;quoted&quot;"), "{x}");
    }
}
