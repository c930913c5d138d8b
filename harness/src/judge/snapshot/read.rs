//! A wire's normal form read back, line by line, for drawing it: which host
//! sent each frame to which, from the section and part it is listed under.
//!
//! Owns: [`Line`], [`read`]. Imports: nothing (the form is written in the
//! parent module; this reads exactly what it writes).

/// One line of a normal form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// `# …`: the form and the scenario's title; or an empty line.
    Comment(&'a str),
    /// A section: `qp q a → b`, `other`, `the capture ends damaged: …`.
    Section(&'a str),
    /// A part of a QP's section: `requests`, `responses`, `paced by the run…`.
    Part(&'a str),
    /// A frame, sent by host `from` to host `to`; `text` is its line.
    Frame { from: &'a str, to: &'a str, text: &'a str },
    /// What was folded: `⋯ sent on past …`, `⟳ the line above, repeated …`.
    Fold(&'a str),
}

/// Each line of `text` (a normal form), in order.
pub(crate) fn read(text: &str) -> Vec<Line<'_>> {
    // The section's two ends, and whether its part lists requests (sent from
    // the first) or responses (from the second).
    let mut ends: Option<(&str, &str)> = None;
    let mut answers = false;
    text.lines()
        .map(|l| {
            if l.is_empty() || l.starts_with('#') {
                return Line::Comment(l);
            }
            if !l.starts_with(' ') {
                ends = l.strip_prefix("qp ").and_then(|r| {
                    let (_, hosts) = r.split_once(' ')?;
                    hosts.split_once(" → ")
                });
                answers = false;
                return Line::Section(l);
            }
            let body = l.trim_start();
            if !l.starts_with("    ") {
                answers = body == "responses";
                return Line::Part(body);
            }
            if body.starts_with('⋯') || body.starts_with('⟳') {
                return Line::Fold(body);
            }
            match ends {
                Some((a, b)) if answers => Line::Frame { from: b, to: a, text: body },
                Some((a, b)) => Line::Frame { from: a, to: b, text: body },
                // `other`: each line names its ends (`a → b CM REQ`).
                None => match body.split_once(" → ").and_then(|(from, rest)| {
                    let (to, text) = rest.split_once(' ')?;
                    Some((from, to, text))
                }) {
                    Some((from, to, text)) => Line::Frame { from, to, text },
                    None => Line::Fold(body),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_frame_is_read_with_its_sender_and_receiver() {
        let text = "# form\n# title\n\nqp q a → b\n  requests\n    SEND Only  psn +0 A len 5\n    ⟳ the line above, repeated\n  responses\n    RNR NAK  psn +0 timer 0\n\nother\n    b → a CM REP\n";
        let l = read(text);
        assert_eq!(l[3], Line::Section("qp q a → b"));
        assert_eq!(l[4], Line::Part("requests"));
        assert_eq!(l[5], Line::Frame { from: "a", to: "b", text: "SEND Only  psn +0 A len 5" });
        assert_eq!(l[6], Line::Fold("⟳ the line above, repeated"));
        assert_eq!(l[8], Line::Frame { from: "b", to: "a", text: "RNR NAK  psn +0 timer 0" });
        assert_eq!(l[10], Line::Section("other"));
        assert_eq!(l[11], Line::Frame { from: "b", to: "a", text: "CM REP" });
        assert_eq!(l.len(), text.lines().count());
    }
}
