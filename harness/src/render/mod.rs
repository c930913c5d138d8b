//! Renderers: results into text for the terminal ([`text`]), JUnit XML
//! ([`junit`]), one self-contained HTML page ([`html`]), the conformance coverage
//! ([`coverage`]) and the case × setup grid ([`matrix`]) as text and HTML, a device profile as TOML
//! ([`profile`]), and what changed between two suite runs ([`suite`]); JSON is the
//! results' own serde form.
//!
//! Owns: every output format but JSON. Imports: results (`crate::results`, its
//! profile included), judge (the decoded wire of a capture, for the ladder and the
//! failing-wire lines, and its time formats), the protocol's stream percentiles,
//! dissector's NAK kinds. Only the CLI imports the renderers (and
//! `results::profile`'s round-trip test, which reads back what [`profile`] wrote).
pub(crate) mod coverage;
pub(crate) mod html;
pub(crate) mod junit;
pub(crate) mod matrix;
pub(crate) mod profile;
pub(crate) mod suite;
pub(crate) mod text;
