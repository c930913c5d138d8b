//! Scenarios: the TOML format (`model`), parsed and checked with spans.
pub mod model;
pub mod runner;
pub mod parse;
pub mod expect;
