//! The controller ↔ bridge protocol (`roce run --bridge` ↔ `roce bridge --listen`):
//! one recorded run per connection. The transport is the agent protocol's: a
//! 4-byte big-endian length, then JSON, authenticated the same way
//! (`agent::auth`, the bridge's `--key-file`).
//!
//! Order: `Hello` → `Begin` → `End`, each answered once; after `Ended` the bridge
//! closes the connection. A run whose controller goes away (or does not end it
//! within the `within_ms` it gave) is ended by the bridge, its recording thrown
//! away, and the bridge forwards without rules, as a plain cable would.
//!
//! Owns: the messages. Imports: the lab switch's run report.
use serde::{Deserialize, Serialize};

use super::Hex;

/// Bumped on any incompatible change; both sides say theirs in `Hello`. 2:
/// `Begun` says the bridge's clock.
pub(crate) const BRIDGE_VERSION: u32 = 2;

/// The most bytes of a run's capture in one [`FromBridge::Capture`] message (hex
/// doubles them, well under the framing's limit).
pub(crate) const CAPTURE_PART: usize = 256 << 10;

/// The longest run a controller may ask for (`Begin::within_ms`): a day.
pub(crate) const RUN_MOST_MS: u64 = 24 * 3600 * 1000;

/// controller → bridge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum ToBridge {
    Hello {
        version: u32,
    },
    /// Start recording, applying `rules` (fault rules as text, as scenarios and
    /// `roce bridge --fault` write them), their random draws seeded from `seed`.
    /// The bridge ends the run itself if no `End` comes within `within_ms`.
    Begin {
        rules: Vec<String>,
        seed: u64,
        within_ms: u64,
    },
    /// Stop recording: the capture comes back in parts, then the report.
    End,
}

/// One of the bridge's ports, as it says it in `Hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BridgePort {
    /// The interface's name.
    pub(crate) name: String,
    pub(crate) mtu: u32,
    /// Whether it has its link now.
    pub(crate) link: bool,
}

/// bridge → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum FromBridge {
    Hello {
        version: u32,
        /// Side `a`, then side `b`.
        ports: Vec<BridgePort>,
    },
    /// The run's recording has begun; `clock_ns` is the bridge's clock as it
    /// said so (ns since the Unix epoch), which its capture stamps frames with:
    /// what lets the controller place its own moments on that clock.
    Begun { clock_ns: u64 },
    /// The next part of the run's pcapng capture, in order.
    Capture { part: Hex },
    /// The run's report: its counters and what each rule did (`capture` is the
    /// bridge's own path, gone by now).
    Ended { report: Box<lab::switch::RunReport> },
    /// The request was refused, or failed: what and, where it helps, a hint.
    Error {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hint: Option<String>,
    },
}

impl FromBridge {
    pub(crate) fn error(message: impl Into<String>, hint: Option<&str>) -> FromBridge {
        FromBridge::Error { message: message.into(), hint: hint.map(str::to_string) }
    }
}
