//! JUnit XML (`roce run --junit`): one testsuite, one testcase per scenario, for
//! CI systems.
//!
//! Owns: [`render`]. Imports: the results' report and status, `super::esc`.
use super::esc as xml_escape;
use crate::results::{Report, Status};

/// JUnit XML: one testsuite, one testcase per scenario; a failed one carries a
/// `<failure>`, a skipped one `<skipped/>` with the reason.
pub(crate) fn render(r: &Report) -> String {
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuite name=\"roce run\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">\n",
        r.scenarios.len(),
        r.failed,
        r.skipped,
        r.duration_s
    ));
    for s in &r.scenarios {
        x.push_str(&format!(
            "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml_escape(&s.file),
            xml_escape(&s.name),
            s.duration_s
        ));
        match s.status {
            Status::Passed => x.push_str("/>\n"),
            Status::Skipped => {
                let why = s.skip_reason.as_deref().unwrap_or("skipped");
                x.push_str(&format!(
                    ">\n    <skipped message=\"{}\"/>\n  </testcase>\n",
                    xml_escape(why)
                ));
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
                }
                let first = text.lines().next().unwrap_or("failed").to_string();
                x.push_str(&format!(
                    ">\n    <failure message=\"{}\">{}</failure>\n  </testcase>\n",
                    xml_escape(&first),
                    xml_escape(&text)
                ));
            }
        }
    }
    x.push_str("</testsuite>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_counts() {
        assert_eq!(xml_escape("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;\u{fffd}");
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
        assert!(x.contains("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""), "{x}");
        assert!(x.contains("<testcase classname=\"c.toml\" name=\"flush\" time=\"0.200\">\n    <skipped message=\"endpoint b: the device lacks ibv_wr_flush\"/>"), "{x}");
        assert_eq!(x.matches("<failure").count(), 1, "a skip is no failure: {x}");
        assert!(x.contains("<testcase classname=\"a.toml\" name=\"ok\" time=\"0.500\"/>"), "{x}");
        assert!(
            x.contains("name=\"bad &lt;1&gt;\"")
                && x.contains("<failure message=\"run: VM b went away\">"),
            "{x}"
        );
        assert!(x.contains("wire of QP q from a: expected x; actual y"), "{x}");
    }
}
