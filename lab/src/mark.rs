//! What the switch did to a frame, as marks: the one type for it, and the one pair
//! of functions that writes it into a frame's pcapng comment and reads it back.
//!
//! The comment stays plain English, so Wireshark users (`frame.comment`) and `roce
//! decode` readers see what happened: `dropped by rule 1 `drop psn=101 nth=1`: not
//! delivered`. Code never matches that English: the judge and the HTML ladder ask
//! [`Marks`] (`dropped()`, `held()`, …), which [`Marks::parse`] builds from the
//! comment [`Marks::comment`] wrote — captures from earlier versions included.
//!
//! Owns: [`Mark`], [`Marks`] and their comment text. Imports: nothing from the
//! crate.

use core::fmt;

/// The fault rule that made a mark: its 1-based place in the run's rules and its
/// canonical text (shown, never matched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    pub index: usize,
    pub rule: String,
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule {} `{}`", self.index, self.rule)
    }
}

/// One thing the switch did to a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// Recorded when it arrived; never handed on.
    Dropped(RuleRef),
    /// Held this many ms before it was handed on.
    Delayed { by: RuleRef, ms: u64 },
    /// Held until the next frame in its direction had passed.
    Reordered(RuleRef),
    /// A held frame (delayed, reordered) arrived this many ns before it was
    /// recorded: where it stands in its sender's order. Every held frame carries
    /// it, after the marks of the rules that held it; captures from before it was
    /// written say only that a frame was held, not since when.
    Arrived { ns_before: u64 },
    /// Bytes changed on the way (`what`: `ECN set to CE`, `ICRC inverted`,
    /// `byte 54 (payload+0) xor 0x01, ICRC recomputed`).
    Modified { by: RuleRef, what: String },
    /// A rule matched but could not apply (`why`: no ICRC, offset past the end …).
    Skipped { by: RuleRef, why: String },
    /// An extra copy made by a `dup` rule: copy `k` of `of`; `original` is what the
    /// switch did to the frame it copied.
    Duplicate { k: u32, of: u32, original: Vec<Mark> },
    /// Put on the wire by the lab itself, sent by no VM.
    Injected,
    /// A response a `respond` rule built and sent in the responder's place: the
    /// requester received it, the responder never sent it.
    Synthesized(RuleRef),
    /// The responder's own answer, held back by a `respond` rule that answered in
    /// its place: sent, not delivered.
    Withheld(RuleRef),
    /// Handed on, but the port it was for could not send it (its link was
    /// down, its interface gone): `why` as the kernel said it. Not delivered.
    Unsent { why: String },
    /// Of two hosts' captures merged ([`dissector::merge`]): sent by host `from`
    /// to host `to`, in `from`'s capture only. Not delivered (lost on the way,
    /// or `to`'s capture missed it).
    SenderOnly { from: String, to: String },
    /// Of two hosts' captures merged: received by `to`, in its capture only;
    /// `from` never sent it (made or changed on the way).
    ReceiverOnly { from: String, to: String },
    /// A comment this module did not write (another tool's), kept as it is.
    Other(String),
}

/// Everything the switch did to one frame, in the order it did it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks(pub Vec<Mark>);

const DUPLICATE: &str = "duplicate ";
const ARRIVED: &str = "arrived ";
const ARRIVED_END: &str = " ms before it was recorded";
const INJECTED: &str = "injected by the lab";
const UNSENT: &str = "not delivered: the port could not send it: ";
const SEPARATOR: &str = "; ";
const SEEN_AT: &str = "seen at ";
const ONLY: &str = " only: ";

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mark::Dropped(r) => write!(f, "dropped by {r}: not delivered"),
            Mark::Delayed { by, ms } => write!(f, "delayed {ms} ms by {by}"),
            Mark::Reordered(r) => write!(f, "reordered by {r}: held behind the next frame"),
            // To the ns, in ms: `arrived 150.000213 ms before it was recorded`.
            Mark::Arrived { ns_before } => write!(
                f,
                "{ARRIVED}{}.{:06}{ARRIVED_END}",
                ns_before / 1_000_000,
                ns_before % 1_000_000
            ),
            Mark::Modified { by, what } => write!(f, "{what} by {by}"),
            Mark::Skipped { by, why } => write!(f, "{by} skipped: {why}"),
            Mark::Duplicate { k, of, original } if original.is_empty() => {
                write!(f, "{DUPLICATE}{k} of {of}")
            }
            Mark::Duplicate { k, of, original } => {
                write!(f, "{DUPLICATE}{k} of {of} ({})", Marks(original.clone()))
            }
            Mark::Injected => f.write_str(INJECTED),
            Mark::Synthesized(r) => {
                write!(f, "synthesized by {r}: sent by the switch, not by the responder")
            }
            Mark::Withheld(r) => {
                write!(f, "withheld by {r}: not delivered, the switch answered instead")
            }
            Mark::Unsent { why } => write!(f, "{UNSENT}{why}"),
            Mark::SenderOnly { from, to } => write!(
                f,
                "{SEEN_AT}{from}{ONLY}never reached {to} (lost on the way, or {to}'s capture missed it)"
            ),
            Mark::ReceiverOnly { from, to } => {
                write!(f, "{SEEN_AT}{to}{ONLY}{from} never sent it (made or changed on the way)")
            }
            Mark::Other(text) => f.write_str(text),
        }
    }
}

/// The comment text: the marks joined by `; `.
impl fmt::Display for Marks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, m) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(SEPARATOR)?;
            }
            m.fmt(f)?;
        }
        Ok(())
    }
}

/// `… by rule N `TEXT``, split into what comes before and the rule.
fn split_rule(s: &str) -> Option<(&str, RuleRef, &str)> {
    let at = s.find("rule ")?;
    let rest = &s[at + 5..];
    let (index, rest) = rest.split_once(" `")?;
    let (rule, after) = rest.split_once('`')?;
    Some((&s[..at], RuleRef { index: index.parse().ok()?, rule: rule.to_string() }, after))
}

/// `150.000213` (ms, six decimals as [`Mark::Arrived`] writes them) → ns.
fn parse_ms_ns(s: &str) -> Option<u64> {
    let (ms, frac) = s.split_once('.')?;
    let all_digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(ms) || frac.len() != 6 || !all_digits(frac) {
        return None;
    }
    ms.parse::<u64>().ok()?.checked_mul(1_000_000)?.checked_add(frac.parse().ok()?)
}

/// `seen at AT only: REST`, as [`Mark::SenderOnly`] and [`Mark::ReceiverOnly`]
/// write it.
fn parse_seen(at: &str, rest: &str) -> Option<Mark> {
    if let Some(to) = rest.strip_prefix("never reached ").and_then(|r| r.split_once(" (lost ")) {
        let to = to.0;
        let whole = format!("never reached {to} (lost on the way, or {to}'s capture missed it)");
        return (rest == whole)
            .then(|| Mark::SenderOnly { from: at.to_string(), to: to.to_string() });
    }
    let from = rest.strip_suffix(" never sent it (made or changed on the way)")?;
    Some(Mark::ReceiverOnly { from: from.to_string(), to: at.to_string() })
}

fn parse_one(s: &str) -> Mark {
    let other = || Mark::Other(s.to_string());
    if s == INJECTED {
        return Mark::Injected;
    }
    if let Some(why) = s.strip_prefix(UNSENT) {
        return Mark::Unsent { why: why.to_string() };
    }
    if let Some((at, rest)) = s.strip_prefix(SEEN_AT).and_then(|r| r.split_once(ONLY)) {
        return parse_seen(at, rest).unwrap_or_else(other);
    }
    if let Some(ms) = s.strip_prefix(ARRIVED).and_then(|r| r.strip_suffix(ARRIVED_END)) {
        return parse_ms_ns(ms).map_or_else(other, |ns_before| Mark::Arrived { ns_before });
    }
    let Some((before, by, after)) = split_rule(s) else { return other() };
    match (before, after) {
        ("dropped by ", ": not delivered") => Mark::Dropped(by),
        ("reordered by ", ": held behind the next frame") => Mark::Reordered(by),
        ("synthesized by ", ": sent by the switch, not by the responder") => Mark::Synthesized(by),
        ("withheld by ", ": not delivered, the switch answered instead") => Mark::Withheld(by),
        ("", after) if after.starts_with(" skipped: ") => {
            Mark::Skipped { by, why: after[" skipped: ".len()..].to_string() }
        }
        (before, "") => {
            match before.strip_prefix("delayed ").and_then(|r| r.strip_suffix(" ms by ")) {
                Some(ms) => match ms.parse() {
                    Ok(ms) => Mark::Delayed { by, ms },
                    Err(_) => other(),
                },
                None => match before.strip_suffix(" by ") {
                    Some(what) if !what.is_empty() => Mark::Modified { by, what: what.to_string() },
                    _ => other(),
                },
            }
        }
        _ => other(),
    }
}

impl Marks {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pcapng comment for these marks (`None` when there are none).
    pub fn comment(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| self.to_string())
    }

    /// Reads back a comment [`Marks::comment`] wrote. Text it did not write becomes
    /// [`Mark::Other`]: no flags.
    pub fn parse(comment: &str) -> Marks {
        if comment.is_empty() {
            return Marks::default();
        }
        // A copy's comment is the copy note, with what was done to the original
        // in parentheses (which may hold `; ` itself).
        if let Some(rest) = comment.strip_prefix(DUPLICATE) {
            let (counts, original) = match rest.split_once(" (") {
                Some((c, o)) => (c, o.strip_suffix(')').map(Marks::parse)),
                None => (rest, Some(Marks::default())),
            };
            let parsed = counts
                .split_once(" of ")
                .and_then(|(k, of)| Some((k.parse().ok()?, of.parse().ok()?)));
            if let (Some((k, of)), Some(original)) = (parsed, original) {
                return Marks(vec![Mark::Duplicate { k, of, original: original.0 }]);
            }
            return Marks(vec![Mark::Other(comment.to_string())]);
        }
        Marks(comment.split(SEPARATOR).map(parse_one).collect())
    }

    fn any(&self, f: &dyn Fn(&Mark) -> bool) -> bool {
        self.0.iter().any(|m| {
            f(m) || matches!(m, Mark::Duplicate { original, .. } if original.iter().any(f))
        })
    }

    /// Never handed on: sent, but not delivered (dropped, withheld for a
    /// synthesized answer, the port it was for could not send it, or, of two
    /// hosts' captures merged, never seen at its receiver).
    pub fn dropped(&self) -> bool {
        self.0.iter().any(|m| {
            matches!(
                m,
                Mark::Dropped(_)
                    | Mark::Withheld(_)
                    | Mark::Unsent { .. }
                    | Mark::SenderOnly { .. }
            )
        })
    }

    /// What the switch did, and that the port it was for could not send it.
    pub fn unsent(&self, why: &str) -> Marks {
        let mut all = self.0.clone();
        // The separator of marks never appears inside one.
        all.push(Mark::Unsent { why: why.replace(SEPARATOR, ", ") });
        Marks(all)
    }

    /// Built by a `respond` rule: a response in the responder's place. Unlike
    /// [`Marks::injected`] frames it is part of the exchange: the requester acts on
    /// it.
    pub fn synthesized(&self) -> bool {
        self.0.iter().any(|m| matches!(m, Mark::Synthesized(_)))
    }

    /// The responder's answer, held back by a `respond` rule.
    pub fn withheld(&self) -> bool {
        self.0.iter().any(|m| matches!(m, Mark::Withheld(_)))
    }

    /// Made by the switch (a `dup` copy, or injected): on the wire, sent by nobody.
    pub fn injected(&self) -> bool {
        self.0.iter().any(|m| matches!(m, Mark::Duplicate { .. } | Mark::Injected))
    }

    /// Held back (delayed or reordered): recorded when it left the switch, later
    /// than it was sent.
    pub fn held(&self) -> bool {
        self.any(&|m| matches!(m, Mark::Delayed { .. } | Mark::Reordered(_)))
    }

    /// How long before it was recorded the switch had it, when the capture says
    /// ([`Mark::Arrived`]): a held frame's place in its sender's order is its
    /// timestamp less that. `None` for a frame recorded as it came, and for a held
    /// one in a capture from before the mark was written (see
    /// [`Marks::least_held_ns`]). A copy's own mark only: a copy never arrived.
    pub fn arrived_ns_before(&self) -> Option<u64> {
        self.0.iter().find_map(|m| match m {
            Mark::Arrived { ns_before } => Some(*ns_before),
            _ => None,
        })
    }

    /// For a held frame of a capture without [`Mark::Arrived`]: the least time its
    /// rules held it — the longest `delay` asked for; 0 for a `reorder` alone,
    /// which holds a frame only until the next one passes.
    pub fn least_held_ns(&self) -> u64 {
        let ms = self.0.iter().filter_map(|m| match m {
            Mark::Delayed { ms, .. } => Some(*ms),
            _ => None,
        });
        ms.max().unwrap_or(0).saturating_mul(1_000_000)
    }

    /// Its bytes were changed on the way.
    pub fn modified(&self) -> bool {
        self.any(&|m| matches!(m, Mark::Modified { .. }))
    }

    /// What was changed, for the ladder's marks column: the descriptions of the
    /// modifications, joined.
    pub fn modifications(&self) -> Vec<&str> {
        let mut out = Vec::new();
        for m in &self.0 {
            match m {
                Mark::Modified { what, .. } => out.push(what.as_str()),
                Mark::Duplicate { original, .. } => {
                    out.extend(original.iter().filter_map(|m| match m {
                        Mark::Modified { what, .. } => Some(what.as_str()),
                        _ => None,
                    }))
                }
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(i: usize, text: &str) -> RuleRef {
        RuleRef { index: i, rule: text.into() }
    }

    /// Every mark reads back as itself, alone or joined with others.
    #[test]
    fn comments_read_back_as_written() {
        let all = vec![
            Mark::Dropped(r(1, "drop psn=101 nth=1")),
            Mark::Delayed { by: r(2, "delay ms=150"), ms: 150 },
            Mark::Reordered(r(3, "reorder psn=3 ms=100")),
            Mark::Arrived { ns_before: 150_000_213 },
            Mark::Modified {
                by: r(4, "corrupt op=send-only at=payload+3 xor=0xff"),
                what: "byte 57 (payload+3) xor 0xff, ICRC recomputed".into(),
            },
            Mark::Modified { by: r(5, "ce"), what: "ECN set to CE".into() },
            Mark::Skipped { by: r(6, "corrupt-icrc"), why: "no ICRC in the frame".into() },
            Mark::Injected,
            Mark::Synthesized(r(
                7,
                "respond op=write-only with=nak code=invalid_request real=withhold reply-qp=0x11",
            )),
            Mark::Withheld(r(
                7,
                "respond op=write-only with=nak code=invalid_request real=withhold reply-qp=0x11",
            )),
            Mark::Unsent { why: "Network is down (os error 100)".into() },
            Mark::SenderOnly { from: "a".into(), to: "b".into() },
            Mark::ReceiverOnly { from: "requester".into(), to: "responder".into() },
        ];
        for m in &all {
            let one = Marks(vec![m.clone()]);
            assert_eq!(Marks::parse(&one.comment().unwrap()), one, "{m}");
        }
        let many = Marks(all[1..6].to_vec());
        assert_eq!(Marks::parse(&many.to_string()), many);
        let dup = Marks(vec![Mark::Duplicate { k: 1, of: 2, original: all[1..3].to_vec() }]);
        assert_eq!(Marks::parse(&dup.to_string()), dup, "{dup}");
        let bare = Marks(vec![Mark::Duplicate { k: 2, of: 2, original: vec![] }]);
        assert_eq!(Marks::parse(&bare.to_string()), bare);
        assert_eq!(Marks::default().comment(), None);
    }

    /// The exact text captures in captures/lab/ carry, read as what it says.
    #[test]
    fn captured_comments_and_their_flags() {
        let d = Marks::parse("dropped by rule 1 `drop dir=a>b op=send-first nth=1`: not delivered");
        assert!(d.dropped() && !d.held() && !d.injected() && !d.modified());
        let c = Marks::parse("duplicate 1 of 1 (delayed 20 ms by rule 1 `delay ms=20`)");
        assert!(c.injected() && c.held() && !c.dropped());
        let m = Marks::parse("ECN set to CE by rule 1 `ce dir=a>b op=send-only`");
        assert!(m.modified() && !m.dropped());
        assert_eq!(m.modifications(), ["ECN set to CE"]);
        let o = Marks::parse("captured on port 3");
        assert_eq!(o, Marks(vec![Mark::Other("captured on port 3".into())]));
        assert!(!o.dropped() && !o.held() && !o.injected() && !o.modified());
        assert!(Marks::parse("duplicate x of y").0[0] == Mark::Other("duplicate x of y".into()));
        // Of two hosts' captures merged: a frame its receiver never saw was not
        // delivered; one its sender never sent was.
        let lost = Marks::parse(
            "seen at a only: never reached b (lost on the way, or b's capture missed it)",
        );
        assert!(lost.dropped() && !lost.injected());
        let made = Marks::parse("seen at b only: a never sent it (made or changed on the way)");
        assert_eq!(made.0, [Mark::ReceiverOnly { from: "a".into(), to: "b".into() }]);
        assert!(!made.dropped() && !made.injected());
        let odd = "seen at a only: never reached b (lost on the way, or c's capture missed it)";
        assert_eq!(Marks::parse(odd).0, [Mark::Other(odd.into())]);
        assert!(Marks::parse("").is_empty());
        let s = Marks::parse("synthesized by rule 2 `respond op=send-only with=rnr timer=1-31 real=withhold reply-qp=0x11`: sent by the switch, not by the responder");
        assert!(s.synthesized() && !s.injected() && !s.dropped() && !s.withheld());
        let w = Marks::parse(
            "withheld by rule 2 `respond with=ack`: not delivered, the switch answered instead",
        );
        assert!(w.withheld() && w.dropped() && !w.synthesized());
        // What a rule did stays beside the port's failure to send it.
        let u = m.unsent("Network is down (os error 100)");
        assert!(u.dropped() && u.modified() && !u.withheld());
        assert_eq!(Marks::parse(&u.to_string()), u);
        assert!(
            u.to_string().ends_with(
                "; not delivered: the port could not send it: Network is down (os error 100)"
            ),
            "{u}"
        );
    }

    /// A held frame says since when the switch had it; a capture from before that
    /// mark says only how long its rules asked for.
    #[test]
    fn a_held_frame_says_when_it_arrived() {
        let h = Marks::parse(
            "delayed 150 ms by rule 2 `delay ms=150`; arrived 150.000213 ms before it was recorded",
        );
        assert!(h.held() && !h.injected());
        assert_eq!((h.arrived_ns_before(), h.least_held_ns()), (Some(150_000_213), 150_000_000));
        let r = Marks::parse("reordered by rule 1 `reorder`: held behind the next frame; arrived 0.004096 ms before it was recorded");
        assert_eq!((r.arrived_ns_before(), r.least_held_ns()), (Some(4096), 0));
        let old = Marks::parse("delayed 20 ms by rule 1 `delay ms=20`");
        assert_eq!((old.arrived_ns_before(), old.least_held_ns()), (None, 20_000_000));
        // A copy of a held frame was made when it left: it never arrived.
        let c = Marks::parse("duplicate 1 of 1 (delayed 20 ms by rule 1 `delay ms=20`; arrived 20.000100 ms before it was recorded)");
        assert!(c.injected() && c.arrived_ns_before().is_none());
        for bad in [
            "arrived 1.5 ms before it was recorded",
            "arrived x.000001 ms before it was recorded",
            "arrived 99999999999999999.000000 ms before it was recorded",
        ] {
            assert_eq!(Marks::parse(bad), Marks(vec![Mark::Other(bad.into())]), "{bad}");
        }
        assert_eq!(
            Mark::Arrived { ns_before: 7 }.to_string(),
            "arrived 0.000007 ms before it was recorded"
        );
    }
}
