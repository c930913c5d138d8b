//! The runs on the switch: which run a frame belongs to (the one that has the
//! switch to itself, or the one whose [`Claim`](crate::claim::Claim) owns it), and
//! beginning and ending runs.
//!
//! Owns: [`Run`], its rules' counts and random streams, the standing rules' state
//! between runs. Imports: the engine and the report types from [`switch`](super); the
//! rules from [`fault`](crate::fault), [`Owner`] from [`claim`](crate::claim), the
//! capture from [`record`](crate::record), the live view's `WireFrame` from
//! [`control`](crate::control) and the responder from [`respond`](crate::respond).
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

use dissector::frame::Frame;

use super::{Counters, Engine, RuleReport, RunId, RunReport, RunSpec};
use crate::claim::Owner;
use crate::control::WireFrame;
use crate::fault::{Action, Dir, Rng, Rule};
use crate::record::Recorder;
use crate::respond::Responder;

/// A fault rule in a run, with its counts and its own random stream.
pub(super) struct RuleState {
    pub(super) rule: Rule,
    pub(super) matched: u64,
    pub(super) applied: u64,
    pub(super) rng: Rng,
    /// `matched` and `applied` when the run began: 0 for a run's own rules, the
    /// lab's counts so far for a standing rule (whose `nth` and `limit` count over
    /// the lab's life).
    pub(super) from: (u64, u64),
}

/// A standing rule between runs: its random stream where the last run left it,
/// and how often it matched and fired over the lab's life.
pub(super) struct StandingState {
    rule: String,
    rng: Rng,
    matched: u64,
    applied: u64,
}

/// A run in progress.
pub(super) struct Run {
    pub(super) id: RunId,
    /// What it owns while it shares the switch; `None`: it has the switch to
    /// itself, and every frame is its.
    pub(super) owner: Option<Owner>,
    pub(super) rules: Vec<RuleState>,
    /// How many of `rules`, from the first, are the lab's standing rules.
    pub(super) standing: usize,
    pub(super) recorder: Option<Box<dyn Recorder>>,
    pub(super) capture: Option<PathBuf>,
    pub(super) live: Option<mpsc::SyncSender<WireFrame>>,
    pub(super) live_skipped: u64,
    pub(super) capture_error: Option<String>,
    pub(super) counters: Counters,
    pub(super) started: Instant,
    pub(super) drops_at_start: u64,
    /// The responder `respond` rules play; `None` when the run has none.
    pub(super) responder: Option<Responder>,
}

impl Engine {
    /// Counts in the lifetime totals and, when a run owns the frame, in its.
    pub(super) fn count(&mut self, run: Option<usize>, f: impl Fn(&mut Counters)) {
        f(&mut self.total);
        if let Some(r) = run.and_then(|i| self.runs.get_mut(i)) {
            f(&mut r.counters);
        }
    }

    /// The run a frame sent in `dir` belongs to (an index into `runs`).
    pub(super) fn owner_of(&mut self, dir: Dir, f: &Frame) -> Option<usize> {
        match self.runs.first() {
            None => None,
            Some(r) if r.owner.is_none() => Some(0),
            Some(_) => {
                self.runs.iter_mut().position(|r| r.owner.as_mut().is_some_and(|o| o.owns(dir, f)))
            }
        }
    }

    pub(super) fn index_of(&self, run: RunId) -> Option<usize> {
        self.runs.iter().position(|r| r.id == run)
    }

    /// Why a run with `spec` cannot start now, if it cannot.
    pub(super) fn refuse(&self, spec: &RunSpec) -> Option<String> {
        if self.runs.iter().any(|r| r.owner.is_none()) {
            return Some(
                "a run is already in progress on this lab, with the switch to itself".into(),
            );
        }
        let Some(claim) = &spec.claim else {
            return (!self.runs.is_empty()).then(|| {
                format!(
                    "{} runs share the switch now; a run that needs it to itself waits for them",
                    self.runs.len()
                )
            });
        };
        if !spec.rules.is_empty() {
            return Some("a run that shares the switch cannot apply fault rules (they would act on the other runs' frames too)".into());
        }
        self.runs
            .iter()
            .filter_map(|r| r.owner.as_ref())
            .find_map(|o| o.claim().overlaps(claim))
            .map(|what| format!("its claim overlaps a run in progress: {what}"))
    }

    /// Starts a run, unless [`refuse`](Self::refuse) says why it cannot start now.
    pub(super) fn begin(&mut self, spec: RunSpec) -> Result<RunId, String> {
        if let Some(why) = self.refuse(&spec) {
            return Err(why);
        }
        self.release_due(true);
        let responder = spec
            .rules
            .iter()
            .any(|r| matches!(r.action, Action::Respond(_)))
            .then(Responder::default);
        let standing = spec.standing.count.min(spec.rules.len());
        let rules = spec
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, rule)| {
                if i < standing {
                    return self.standing_state(i, rule, spec.standing.seed);
                }
                let rng = Rng::new(rule.seed.unwrap_or(spec.seed.wrapping_add(i as u64)));
                RuleState { rule, matched: 0, applied: 0, rng, from: (0, 0) }
            })
            .collect();
        let id = self.next_id;
        self.next_id += 1;
        self.runs.push(Run {
            id,
            owner: spec.claim.map(Owner::new),
            rules,
            standing,
            recorder: spec.recorder,
            capture: spec.capture,
            live: spec.live,
            live_skipped: 0,
            capture_error: None,
            counters: Counters::default(),
            started: Instant::now(),
            drops_at_start: self.drops(),
            responder,
        });
        Ok(id)
    }

    /// Ends run `id`: finishes its capture and reports what it counted.
    pub(super) fn end(&mut self, id: RunId) -> Result<RunReport, String> {
        // Whatever a rule still holds belongs to this run.
        self.release_due(true);
        let Some(mut run) = self.index_of(id).map(|i| self.runs.remove(i)) else {
            return Err("no such run in progress".to_string());
        };
        for (kept, st) in self.standing.iter_mut().zip(&run.rules[..run.standing]) {
            kept.rng = st.rng.clone();
            kept.matched = st.matched;
            kept.applied = st.applied;
        }
        if let Some(rec) = run.recorder.take() {
            if let Err(e) = rec.finish() {
                run.capture_error.get_or_insert(format!("finishing the capture: {e}"));
            }
        }
        Ok(RunReport {
            counters: run.counters,
            rules: run
                .rules
                .iter()
                .map(|s| RuleReport {
                    rule: s.rule.to_string(),
                    matched: s.matched - s.from.0,
                    applied: s.applied - s.from.1,
                })
                .collect(),
            socket_drops: self.drops().saturating_sub(run.drops_at_start),
            capture: run.capture.map(|p| p.display().to_string()),
            capture_error: run.capture_error,
            duration_ms: run.started.elapsed().as_millis() as u64,
            live_skipped: run.live_skipped,
        })
    }
}

impl Engine {
    /// Standing rule `i` as the last run left it (its random stream and its
    /// counts); new, its stream seeded from `seed + i` or the rule's own seed, the
    /// first time or when the standing rules are not the ones kept.
    fn standing_state(&mut self, i: usize, rule: Rule, seed: u64) -> RuleState {
        let text = rule.to_string();
        if self.standing.get(i).is_none_or(|s| s.rule != text) {
            self.standing.truncate(i);
            let rng = Rng::new(rule.seed.unwrap_or(seed.wrapping_add(i as u64)));
            self.standing.push(StandingState { rule: text, rng, matched: 0, applied: 0 });
        }
        let kept = &self.standing[i];
        RuleState {
            rule,
            matched: kept.matched,
            applied: kept.applied,
            rng: kept.rng.clone(),
            from: (kept.matched, kept.applied),
        }
    }

    /// Each standing rule's matches and firings over the lab's life: the runs
    /// that ended, and the one in progress.
    pub(super) fn standing_report(&self) -> Vec<RuleReport> {
        let current = self.runs.iter().find(|r| r.standing > 0);
        self.standing
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let now = current.and_then(|r| r.rules[..r.standing].get(i));
                RuleReport {
                    rule: s.rule.clone(),
                    matched: now.map_or(s.matched, |n| n.matched),
                    applied: now.map_or(s.applied, |n| n.applied),
                }
            })
            .collect()
    }
}
