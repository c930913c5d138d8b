//! `roce`: a RoCEv2 test harness and packet analyzer.
//!
//! Layers, top to bottom; a module never imports from one above it (`harness/LAYERS`
//! writes the order down, and `rust-layers.py` checks it in CI):
//! - `cli` — the binary layer: one module per command, options into a plan,
//!   exit codes.
//! - `fuzz` — `roce fuzz`: batches of crafted requests into a lab VM's live QPs, each
//!   run as a scenario and judged by oracles; findings confirmed, minimised, saved as
//!   scenario files.
//! - `controller` — runs scenarios: agents, the wire's recording, the judge.
//! - `render` — results as text, JSON, JUnit, HTML, profiles, suite diffs.
//! - `judge` — one decoded wire timeline per scenario → verdicts, observations.
//! - `results` — the shapes results take (and saved reports are read back as).
//! - `agent` — the endpoint agent: authentication, limits, its executor.
//! - `scenario` — the scenario format: model, loading, checking with spans.
//! - `catalogue` — the conformance catalogue (`conformance/catalogue.toml`): the
//!   rules scenarios name in `spec` and `roce coverage` counts.
//! - `protocol` — the controller ↔ agent messages and the stream vocabulary,
//!   which the scenario model, the judge, results and renderers read too.
//! - `net`, `verbs`, `parquet_writer` — this host's network I/O, verbs over `rdma-sys`,
//!   and the Parquet writer.
//!
//! Below the harness: the `lab` crate (VMs, switch, fault rules) and `dissector`
//! (wire formats, captures, flows, and the RoCE vocabulary everything uses).
//!
//! Owns: the module tree and what is `pub`. Imports: nothing; each layer's `mod.rs`
//! says what it owns and imports.
// Its docs are for the people working on it: read them with --document-private-items.
#![allow(rustdoc::private_intra_doc_links)]

// What other crates (the binary, the tests, the benches) use is `pub`; the rest
// is the crate's own.
pub mod cli;
pub mod net;
pub mod scenario;

mod agent;
mod catalogue;
mod controller;
mod fuzz;
mod judge;
mod parquet_writer;
mod protocol;
mod render;
mod results;
mod verbs;
