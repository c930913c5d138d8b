//! What expectations say of a frame beyond its opcode: the PSNs the requests and
//! responses of a QP direction carry (`psns`, `response_psns`), and the order of
//! frames across both directions of a QP pair (`[[expect.order]]`). Conditions on
//! other header fields (`{infiniband.bth.se == 1}`) are the display filter's,
//! evaluated once when the timeline was read.
//!
//! Owns: the semantics of `psns`, `response_psns` and `[[expect.order]]`.
//! Imports: the checked model, the timeline, the verdict type, dissector's `Psn`.
use dissector::wire::Psn;

use super::{pair, Packet, Timeline};
use crate::results::{Evidence, Verdict, VerdictKind};
use crate::scenario::model::{OrderExpect, Psns, Scenario};
use crate::scenario::pattern::Pattern;

/// Each PSN once, in the order it was first on the wire: what was sent, resends
/// left out.
pub(super) fn first_sent(packets: &[&Packet]) -> Vec<Psn> {
    let mut seen = std::collections::HashSet::new();
    packets.iter().map(|f| f.psn).filter(|p| seen.insert(*p)).collect()
}

/// `[16777214, 16777215, 0]`; long lists shortened.
pub(super) fn list(psns: &[Psn]) -> String {
    let v: Vec<String> = psns.iter().map(|p| p.to_string()).collect();
    format!("[{}]", super::first_of(&v))
}

/// Whether `actual` (each PSN once, in order) is what `want` says, `first` being
/// the sending QP's starting PSN when it is known; and how the expectation reads.
pub(super) fn psns_check(
    what: &str,
    want: &Psns,
    actual: &[Psn],
    first: Option<Psn>,
) -> (String, bool) {
    match want {
        Psns::Consecutive => {
            let from = first.map_or(String::new(), |f| format!(" from {f}"));
            let ok = actual.first().is_some_and(|a| first.is_none_or(|f| *a == f))
                && actual.windows(2).all(|w| w[1] == w[0].add(1));
            (format!("{what} PSNs consecutive{from}"), ok)
        }
        Psns::Each(list) => {
            let needs_first =
                list.iter().any(|p| matches!(p, crate::scenario::model::WirePsn::First(_)));
            let Some(resolved) = (match first {
                Some(f) => Some(list.iter().map(|p| p.resolve(f)).collect::<Vec<Psn>>()),
                None if !needs_first => Some(list.iter().map(|p| p.resolve(Psn::new(0))).collect()),
                None => None,
            }) else {
                return (
                    format!(
                        "{what} PSNs relative to the QP's starting PSN, which no agent reported"
                    ),
                    false,
                );
            };
            let written: Vec<String> = list.iter().map(|p| p.to_string()).collect();
            let shown = if needs_first {
                format!("[{}] = {}", written.join(", "), self::list(&resolved))
            } else {
                self::list(&resolved)
            };
            (format!("{what} PSNs {shown}"), actual == resolved.as_slice())
        }
    }
}

/// Whether the frame `f` is what `p` names (its condition by the timeline's mask).
fn named(p: &Pattern, f: &Packet, conditions: &[String]) -> bool {
    p.matches(f.op, f.ack_class(), &|c| Timeline::holds(conditions, f.held, c))
}

/// `[[expect.order]]`: on QP `e.qp`, across both directions, every frame `then`
/// names comes after the first frame `first` names, and both are there.
pub(super) fn order(sc: &Scenario, e: &OrderExpect, o: &Evidence, t: &Timeline) -> Verdict {
    let what = format!("order on QP {}", e.qp);
    let want = format!("every `{}` after the first `{}`", e.then, e.first);
    let verdict = |ok: bool, actual: String| {
        Verdict::new(VerdictKind::Wire, what.clone(), ok, want.clone(), actual)
    };
    let Some(q) = sc.qps.iter().find(|q| q.name == e.qp) else {
        return verdict(false, format!("no QP {}", e.qp));
    };
    let [a, b] = &q.between;
    let (Some(ab), Some(ba)) = (pair(o, q, a, b, t), pair(o, q, b, a, t)) else {
        return verdict(false, "an end of the QP was never set up".into());
    };
    // Requests and responses of both directions: each frame is in two of them.
    let mut frames: Vec<&Packet> =
        ab.reqs.iter().chain(&ab.resps).chain(&ba.reqs).chain(&ba.resps).copied().collect();
    frames.sort_by_key(|f| f.number);
    frames.dedup_by_key(|f| f.number);
    let first = frames.iter().find(|f| named(&e.first, f, &t.conditions));
    let thens: Vec<&&Packet> = frames.iter().filter(|f| named(&e.then, f, &t.conditions)).collect();
    match (first, thens.first()) {
        (None, _) => verdict(false, format!("no `{}` on the wire", e.first)),
        (_, None) => verdict(false, format!("no `{}` on the wire", e.then)),
        (Some(f), Some(t0)) => {
            let ok = t0.number > f.number;
            verdict(
                ok,
                format!(
                    "first `{}` in frame {}; first `{}` in frame {}",
                    e.first, f.number, e.then, t0.number
                ),
            )
        }
    }
}
