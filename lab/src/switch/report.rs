//! What the switch counts, over its life and per run, and what a run's end reports.
//!
//! Owns: [`Counters`] (with the two checks a run's capture is proved complete by),
//! [`RuleReport`] and [`RunReport`]. Imports: nothing from the crate: these are plain
//! data the daemon, the client and the harness read.
use serde::{Deserialize, Serialize};

/// What the switch counted (over its life, or over one run).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counters {
    /// Frames received from VM a / VM b.
    pub from_a: u64,
    pub from_b: u64,
    /// Of those, RoCE frames (BTH parsed).
    pub roce: u64,
    /// Frames handed to the receiving VM's socket (duplicates and injections included).
    pub forwarded: u64,
    pub dropped: u64,
    pub modified: u64,
    /// Extra copies sent by `dup` rules.
    pub duplicated: u64,
    pub delayed: u64,
    pub reordered: u64,
    pub injected: u64,
    /// Responses built by `respond` rules and sent in the responder's place.
    #[serde(default)]
    pub synthesized: u64,
    /// Frames the switch could not hand on (send failed).
    pub send_errors: u64,
    /// Frames written to the capture.
    pub recorded: u64,
    pub record_errors: u64,
    pub bytes: u64,
}

impl Counters {
    pub fn received(&self) -> u64 {
        self.from_a + self.from_b
    }
    /// Every frame that went through the switch is in the capture exactly once.
    pub fn capture_complete(&self) -> bool {
        self.record_errors == 0 && self.recorded == self.made()
    }
    /// Frames that went through the switch: received, and the ones it made.
    fn made(&self) -> u64 {
        self.received() + self.duplicated + self.injected + self.synthesized
    }
    /// Every frame was forwarded, dropped by a rule, or failed to send.
    pub fn balanced(&self) -> bool {
        self.forwarded + self.dropped + self.send_errors == self.made()
    }
    pub fn summary(&self) -> String {
        format!(
            "{} frames (a→b {}, b→a {}; {} RoCE), forwarded {}, dropped {}, modified {}, duplicated {}, delayed {}, reordered {}, injected {}, synthesized {}, send errors {}",
            self.received(),
            self.from_a,
            self.from_b,
            self.roce,
            self.forwarded,
            self.dropped,
            self.modified,
            self.duplicated,
            self.delayed,
            self.reordered,
            self.injected,
            self.synthesized,
            self.send_errors
        )
    }
}

/// How often each rule matched and fired during a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RuleReport {
    pub rule: String,
    pub matched: u64,
    pub applied: u64,
}

/// The end of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunReport {
    pub counters: Counters,
    pub rules: Vec<RuleReport>,
    /// Kernel drops on the wire's sockets during the run.
    pub socket_drops: u64,
    pub capture: Option<String>,
    /// Writing the capture failed: the first error.
    pub capture_error: Option<String>,
    pub duration_ms: u64,
    /// Frames not shown live because the client fell behind (the capture and the
    /// counters are unaffected).
    #[serde(default)]
    pub live_skipped: u64,
}
