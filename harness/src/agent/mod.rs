//! The endpoint agent (`roce agent`): executes its part of a scenario with real
//! verbs. `roce run` starts one per endpoint (in a lab VM over `lab exec` stdio) or
//! reaches one on a real host (`roce agent --listen HOST:PORT --key-file F`).
//!
//! A listening agent runs on a shared lab network, so every byte that reaches it
//! is treated as hostile: the controller must prove it has the key ([`auth`])
//! within [`HANDSHAKE_WITHIN`], every message after that is authenticated, a
//! second controller is told at once that the agent is busy and by whom, and a
//! controller that sends no whole message within the heartbeat deadline is
//! dropped with everything it set up (the executor's state owns the verbs
//! resources, so they go when it does). Before the key is proved, a connection
//! costs the agent a place in one poll loop ([`listen`]) and no thread; the one
//! controller served at a time is served on one session thread started with the
//! agent, so no connection ever needs a thread to be started for it.
//!
//! Owns: the agent's side of the protocol ([`crate::protocol`]): its
//! authentication ([`auth`]), the listening agent's front door ([`listen`]), its
//! limits ([`limits`]), its executor ([`exec`]) and how it serves ([`serve`]; these
//! two need libibverbs: the `verbs` feature), the MR table it puts in rdma_cm's
//! private data ([`cm_private`]), the crafted frames it sends ([`probe`]), the
//! device counters it reads around each scenario ([`counters`]) and the capture
//! of its own host's wire ([`capture`]: libpcap, or its `--capture-command`).
//! Imports: the protocol it speaks (`crate::protocol`), verbs, net, dissector (and
//! `lab::progress::to_stderr`, for its log lines).
//! Never the scenario model: the controller resolves a scenario into this
//! protocol's own messages.
pub(crate) mod auth;
#[cfg(feature = "verbs")]
pub(crate) mod capture;
pub(crate) mod cm_private;
pub(crate) mod counters;
#[cfg(feature = "verbs")]
pub(crate) mod exec;
pub(crate) mod limits;
pub(crate) mod listen;
pub(crate) mod probe;
#[cfg(feature = "verbs")]
mod serve;

use std::time::Duration;

#[cfg(feature = "verbs")]
pub(crate) use serve::{serve_listen, serve_stdio, ListenOpts, NoKey};

/// A connection that has not finished the handshake by then is dropped.
pub(crate) const HANDSHAKE_WITHIN: Duration = Duration::from_secs(10);
/// A controller sends a heartbeat when it has sent nothing for this long.
pub(crate) const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
