//! JUnit XML (`roce run --junit`): one testsuite, one testcase per scenario, for
//! CI systems.
use super::esc as xml_escape;
use crate::results::Report;

/// JUnit XML: one testsuite, one testcase per scenario.
pub fn render(r: &Report) -> String {
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuite name=\"roce run\" tests=\"{}\" failures=\"{}\" errors=\"0\" time=\"{:.3}\">\n",
        r.scenarios.len(),
        r.failed,
        r.duration_s
    ));
    for s in &r.scenarios {
        x.push_str(&format!("  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"", xml_escape(&s.file), xml_escape(&s.name), s.duration_s));
        if s.pass {
            x.push_str("/>\n");
            continue;
        }
        x.push_str(">\n");
        let mut text = String::new();
        if let Some(e) = &s.error {
            text.push_str(&format!("run: {e}\n"));
        }
        for v in s.verdicts.iter().filter(|v| !v.pass) {
            text.push_str(&format!("{}: expected {}; actual {}\n", v.what, v.expected, v.actual));
        }
        let first = text.lines().next().unwrap_or("failed").to_string();
        x.push_str(&format!("    <failure message=\"{}\">{}</failure>\n  </testcase>\n", xml_escape(&first), xml_escape(&text)));
    }
    x.push_str("</testsuite>\n");
    x
}


/// Seed scenarios on a booted lab (`roce lab bench`): how many a minute, and what
/// each costs beyond its own traffic (the span from its first frame to its last on

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_counts() {
        assert_eq!(xml_escape("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;\u{fffd}");
        let r: Report = serde_json::from_value(serde_json::json!({
            "scenarios": [
                {"name": "ok", "file": "a.toml", "pass": true, "error": null, "verdicts": [], "capture": null, "duration_s": 0.5, "endpoints": {}, "connections": []},
                {"name": "bad <1>", "file": "b.toml", "pass": false, "error": "VM b went away", "verdicts": [
                    {"kind": "wire", "what": "wire of QP q from a", "pass": false, "expected": "x", "actual": "y"}
                ], "capture": null, "duration_s": 1.0, "endpoints": {}, "connections": []}
            ],
            "passed": 1, "failed": 1, "duration_s": 1.5
        })).unwrap();
        let x = render(&r);
        assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
        assert!(x.contains("<testcase classname=\"a.toml\" name=\"ok\" time=\"0.500\"/>"), "{x}");
        assert!(x.contains("name=\"bad &lt;1&gt;\"") && x.contains("<failure message=\"run: VM b went away\">"), "{x}");
        assert!(x.contains("wire of QP q from a: expected x; actual y"), "{x}");
    }
}
