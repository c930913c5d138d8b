//! A received frame through its run's rules: counted, classified as RoCE or not,
//! then dropped, changed, duplicated, held back or answered in the responder's
//! place as the run's fault rules say.
//!
//! Owns: the engine's ingress and a frame's verdict. Imports: the engine and its
//! rooms `deliver`, `roce` and `runs` from [`switch`](super); the rules from
//! [`fault`](crate::fault), the marks it leaves from [`mark`](crate::mark) and the
//! crafted answers from [`respond`](crate::respond).
use std::time::{Duration, Instant};

use dissector::frame;
use dissector::wire::Psn;
use dissector::LinkType;

use super::deliver::Held;
use super::roce::{apply_modification, roce_view, RoceView};
use super::runs::Run;
use super::{Engine, RunId};
use crate::fault::{Action, Dir, Real};
use crate::mark::{Mark, Marks, RuleRef};
use crate::respond::Request;
use dissector::capture::unix_now_ns;

/// What a run's rules made of one frame.
struct Verdict {
    /// The frame as it goes on (changed by `corrupt`, `ce`, …).
    frame: Vec<u8>,
    marks: Marks,
    drop: bool,
    modified: bool,
    dups: u32,
    hold_ms: u64,
    reorder_ms: Option<u64>,
    /// The answer a `respond` rule built, and the rule.
    synthesized: Option<(Vec<u8>, RuleRef)>,
}

impl Engine {
    /// A frame received from `dir`'s sender: counted, then through its run's rules.
    pub(super) fn ingress(&mut self, dir: Dir, data: &[u8]) {
        let ts = unix_now_ns();
        let len = data.len() as u64;
        let f = frame::decode(LinkType::ETHERNET, data, &self.opts);
        let at = self.owner_of(dir, &f);
        self.count(at, |c| {
            match dir {
                Dir::AtoB => c.from_a += 1,
                Dir::BtoA => c.from_b += 1,
            }
            c.bytes += len;
        });
        let view = roce_view(&f, data);
        if view.is_some() {
            self.count(at, |c| c.roce += 1);
        }
        let (Some(v), Some(run)) = (view, at.and_then(|i| self.runs.get_mut(i))) else {
            self.forward(at, dir, data, ts);
            return;
        };
        let id = run.id;
        let request = Request { dir, qp: v.qp, psn: Psn::new(v.psn), opcode: v.opcode };
        if let Some(resp) = &mut run.responder {
            // The responder's own answer to a request a rule answered instead.
            if let Some(by) = resp.withheld(dir, v.qp, request.psn, v.opcode) {
                self.count(at, |c| c.dropped += 1);
                self.record(at, dir, ts, data, &Marks(vec![Mark::Withheld(by)]));
                return;
            }
        }
        if run.rules.is_empty() {
            self.forward(at, dir, data, ts);
            return;
        }
        let verdict = judge(run, dir, data, &v, &request);
        self.settle(at, id, dir, ts, verdict);
    }

    /// Carries out a [`Verdict`] on a frame of run `id` (at index `at`).
    fn settle(&mut self, at: Option<usize>, id: RunId, dir: Dir, ts: u64, v: Verdict) {
        let Verdict { frame, marks, drop, modified, dups, hold_ms, reorder_ms, synthesized } = v;
        // The request first (delivered, held or dropped), then the crafted
        // answer: the capture shows cause before effect, and the answer still
        // reaches the requester before any the responder could give.
        if drop {
            self.count(at, |c| c.dropped += 1);
            self.record(at, dir, ts, &frame, &marks);
        } else {
            if modified {
                self.count(at, |c| c.modified += 1);
            }
            if hold_ms > 0 || reorder_ms.is_some() {
                if hold_ms > 0 {
                    self.count(at, |c| c.delayed += 1);
                }
                if reorder_ms.is_some() {
                    self.count(at, |c| c.reordered += 1);
                }
                let due =
                    Instant::now() + Duration::from_millis(hold_ms.max(reorder_ms.unwrap_or(0)));
                self.held.push_back(Held {
                    due,
                    dir,
                    frame,
                    marks,
                    dups,
                    behind_next: reorder_ms.is_some(),
                    arrived_ns: ts,
                    run: id,
                });
            } else {
                self.deliver(at, dir, &frame, &marks, dups, ts);
                self.release_reordered(dir);
            }
        }
        if let Some((answer, by)) = synthesized {
            self.count(at, |c| c.synthesized += 1);
            self.egress(
                at,
                dir.reverse(),
                &answer,
                &Marks(vec![Mark::Synthesized(by)]),
                unix_now_ns(),
            );
        }
    }
}

/// A RoCE frame through the run's rules, in order: which match, which of those
/// fire (`nth`, `prob`, `limit`), and what they do to it.
fn judge(run: &mut Run, dir: Dir, data: &[u8], v: &RoceView, request: &Request) -> Verdict {
    let mut frame = data.to_vec();
    let mut marks: Vec<Mark> = Vec::new();
    let (mut drop, mut modified, mut dups, mut hold_ms, mut reorder_ms) =
        (false, false, 0u32, 0u64, None);
    let mut synthesized: Option<(Vec<u8>, RuleRef)> = None;
    for (i, st) in run.rules.iter_mut().enumerate() {
        if !st.rule.matches(dir, v.opcode, v.qp, v.psn) {
            continue;
        }
        st.matched += 1;
        let chosen = match (st.rule.nth, st.rule.prob) {
            (Some(n), _) => st.matched == n,
            (None, Some(p)) => st.rng.next_f64() < p,
            (None, None) => true,
        };
        if !chosen || st.rule.cap().is_some_and(|c| st.applied >= c) {
            continue;
        }
        // One crafted answer per request: a second `respond` waits its turn.
        if synthesized.is_some() && matches!(st.rule.action, Action::Respond(_)) {
            continue;
        }
        st.applied += 1;
        let by = RuleRef { index: i + 1, rule: st.rule.to_string() };
        match st.rule.action {
            Action::Drop => {
                marks.push(Mark::Dropped(by));
                drop = true;
                break;
            }
            Action::Respond(r) => {
                let Some(resp) = &mut run.responder else { continue };
                match resp.build(data, request, &r, st.applied) {
                    Ok(answer) => {
                        match (r.real, r.reply_qp) {
                            (Real::Lost, _) => {
                                marks.push(Mark::Dropped(by.clone()));
                                drop = true;
                            }
                            (Real::Withhold, Some(qp)) => resp.withhold(request, qp, by.clone()),
                            _ => {}
                        }
                        synthesized = Some((answer, by));
                        if drop {
                            break;
                        }
                    }
                    Err(why) => marks.push(Mark::Skipped { by, why }),
                }
            }
            Action::Dup { copies } => dups += copies,
            Action::Delay { ms } => {
                hold_ms = hold_ms.max(ms);
                marks.push(Mark::Delayed { by, ms });
            }
            Action::Reorder { ms } => {
                reorder_ms = Some(ms);
                marks.push(Mark::Reordered(by));
            }
            ref a => match apply_modification(&mut frame, v, a, st.rule.fix_icrc) {
                Ok(what) => {
                    modified = true;
                    marks.push(Mark::Modified { by, what });
                }
                Err(why) => marks.push(Mark::Skipped { by, why }),
            },
        }
    }
    let marks = Marks(marks);
    if !drop {
        if let Some(resp) = &mut run.responder {
            resp.delivered(request);
        }
    }
    Verdict { frame, marks, drop, modified, dups, hold_ms, reorder_ms, synthesized }
}
