//! `roce`: a RoCEv2 test harness and packet analyzer.
//!
//! Layers, top to bottom; a module never imports from one above it:
//! - [`cli`] — the binary layer: one module per command, options into a plan,
//!   exit codes.
//! - [`controller`] — runs scenarios: agents, the wire's recording, the judge.
//! - [`render`] — results as text, JSON, JUnit, HTML, profiles, suite diffs.
//! - [`judge`] — one decoded wire timeline per scenario → verdicts, observations.
//! - [`results`] — the shapes results take (and saved reports are read back as).
//! - [`agent`] — the endpoint agent: its protocol and its executor.
//! - [`scenario`] — the scenario format: model, loading, checking with spans.
//! - [`net`], [`verbs`] — this host's network I/O, and verbs over `rdma-sys`.
//!
//! Below the harness: the `lab` crate (VMs, switch, fault rules) and `dissector`
//! (wire formats, captures, flows, and the RoCE vocabulary everything uses).
pub mod agent;
pub mod cli;
pub mod controller;
pub mod judge;
pub mod net;
pub mod render;
pub mod results;
pub mod scenario;
pub mod verbs;
