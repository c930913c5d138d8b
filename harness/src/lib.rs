//! `roce`: a RoCEv2 test harness and packet analyzer.
//!
//! Layers, top to bottom; a module never imports from one above it (`harness/LAYERS`
//! writes the order down, and `rust-layers.py` checks it in CI):
//! - `cli` — the binary layer: one module per command, options into a plan,
//!   exit codes.
//! - `inputs` — the parsers of outside input, one `pub` door each, for the
//!   libFuzzer targets (`fuzz/`) and their regression test.
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
//! - `analyze` — the analyzer's pipelines (`roce decode`, `roce flows`): a capture
//!   file, a live interface or a dataset of captures decoded frame by frame or
//!   analysed per QP flow, on one thread or several, from a plain plan.
//! - `net`, `verbs`, `parquet_writer` — this host's network I/O, verbs over `rdma-sys`,
//!   and the Parquet writer.
//! - `vocab` — the verbs vocabulary as plain data (names, features, QP parameters,
//!   guard regions), which every layer above speaks and only `verbs` calls.
//!
//! Features (all on by default; see `harness/Cargo.toml`): `verbs` (the agent,
//! rdma-sys), `live` (libpcap capture), `lab` (runs: the controller, the fuzzer,
//! the lab). `--no-default-features` builds the analyzer and the offline
//! commands where there is no RDMA stack; the modules those features gate are
//! the only ones that reach rdma-sys and libpcap, which that build proves.
//!
//! Below the harness: the `lab` crate (VMs, switch, fault rules) and `dissector`
//! (wire formats, captures, flows, and the RoCE vocabulary everything uses).
//!
//! Owns: the module tree and what is `pub`. Imports: nothing; each layer's `mod.rs`
//! says what it owns and imports.
// Its docs are for the people working on it: read them with --document-private-items.
#![allow(rustdoc::private_intra_doc_links)]
// Without runs, what only the controller and the agent reach (parts of the
// protocol, the judge's live timers, results being built) is compiled but
// unused; a full build, where clippy runs with -D warnings, holds every item to use.
#![cfg_attr(not(feature = "lab"), allow(dead_code, unused_imports))]

// What other crates (the binary, the tests, the benches) use is `pub`; the rest
// is the crate's own.
pub mod cli;
#[doc(hidden)]
pub mod inputs;
pub mod net;
pub mod scenario;

mod agent;
mod analyze;
#[cfg(feature = "lab")]
mod bridge;
mod catalogue;
#[cfg(feature = "lab")]
mod controller;
#[cfg(feature = "lab")]
mod fuzz;
mod judge;
mod parquet_writer;
mod protocol;
mod render;
mod repro;
mod results;
#[cfg(feature = "verbs")]
mod verbs;
mod vocab;
