//! Renderers: results into text for the terminal ([`text`]), JUnit XML
//! ([`junit`]), one self-contained HTML page ([`html`]), a device profile as TOML
//! ([`profile`]), and what changed between two suite runs ([`suite`]); JSON is the
//! results' own serde form. [`esc`] escapes text for HTML and XML.
//!
//! Owns: every output format but JSON. Imports: results (`crate::results`, its
//! profile included), judge (the decoded wire of a capture, for the ladder and the
//! failing-wire lines, and its time formats), the protocol's stream percentiles,
//! dissector's NAK kinds. Only the CLI imports the renderers (and
//! `results::profile`'s round-trip test, which reads back what [`profile`] wrote).
pub(crate) mod html;
pub(crate) mod junit;
pub(crate) mod profile;
pub(crate) mod suite;
pub(crate) mod text;

/// Text for HTML and XML content and attribute values: `& < > " '` escaped,
/// control characters (other than newline and tab) replaced by U+FFFD.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            '\n' | '\t' => o.push(c),
            c if c.is_control() => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}
