//! The little language of wire expectations: a list of items, each a name with
//! `|` alternatives, an optional header condition in braces, and a `*` (any
//! number) or `+` (one or more) suffix, matched against the whole sequence of
//! requests or responses: `SEND Only {infiniband.bth.se == 1}`,
//! `RDMA WRITE Middle {infiniband.bth.padcnt == 0}*`. The condition is a display
//! filter, the language of `roce decode -Y`, with tshark's field names: one
//! vocabulary for what a frame holds, the dissector's.
//!
//! Names come from the dissector's vocabulary, never from a list of our own: an
//! operation of the opcode table (`SEND Only`, `RDMA READ Response Only`,
//! `ATOMIC Acknowledge`, `Acknowledge`), an acknowledgement class (`ACK`, `RNR
//! NAK`, `NAK Remote Access Error`), or a bare `NAK` for any negative one.
//!
//! Owns: [`Pattern`], its atoms and their matching. Imports: dissector's opcode and ACK
//! class, its display filter and its [`UnknownName`]; nothing else.
use std::fmt;
use std::str::FromStr;

use dissector::filter::{Filter, FilterError};
use dissector::text::UnknownName;
use dissector::wire::{AckClass, Opcode};

/// One name of a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Atom {
    /// An operation of the opcode table, by its name without the transport.
    Op(&'static str),
    /// An acknowledgement of this class (an Acknowledge's AETH).
    Ack(AckClass),
    /// Any NAK, RNR NAKs included.
    AnyNak,
}

impl Atom {
    /// Whether a packet of operation `op` (its table name) whose AETH says `ack`
    /// is what this atom names. An acknowledgement class names an Acknowledge by
    /// its AETH; an operation name names any packet of that operation.
    pub(crate) fn matches(self, op: &str, ack: Option<AckClass>) -> bool {
        match self {
            Atom::Op(name) => op == name,
            Atom::Ack(c) => op == "Acknowledge" && ack == Some(c),
            Atom::AnyNak => {
                op == "Acknowledge" && matches!(ack, Some(AckClass::RnrNak | AckClass::Nak(_)))
            }
        }
    }

    /// Every name an atom can have, for suggestions.
    pub(crate) fn names() -> Vec<String> {
        let mut v: Vec<String> = Opcode::all().map(|i| i.name.to_string()).collect();
        v.sort();
        v.dedup();
        v.extend(AckClass::all().map(|c| c.to_string()));
        v.push("NAK".into());
        v
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Op(n) => f.write_str(n),
            Atom::Ack(c) => c.fmt(f),
            Atom::AnyNak => f.write_str("NAK"),
        }
    }
}

impl FromStr for Atom {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Atom, UnknownName> {
        let s = s.trim();
        if let Some(i) = Opcode::all().find(|i| i.name == s) {
            return Ok(Atom::Op(i.name));
        }
        if s == "NAK" {
            return Ok(Atom::AnyNak);
        }
        s.parse::<AckClass>().map(Atom::Ack).map_err(|_| {
            UnknownName::among("opcode", s, s, Atom::names().iter().map(String::as_str))
        })
    }
}

/// How many of an item a sequence may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repeat {
    One,
    /// `*`: any number.
    Any,
    /// `+`: one or more.
    Some,
}

/// One item of an expected sequence: `RDMA WRITE Middle*`, `ACK+`,
/// `NAK Invalid Request | NAK Remote Access Error`, `SEND Only {infiniband.bth.se == 1}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    pub(crate) alternatives: Vec<Atom>,
    /// A condition on the frame's headers (a display filter, compiled when the
    /// pattern was read), as written between the braces.
    pub(crate) filter: Option<String>,
    pub(crate) repeat: Repeat,
}

impl Pattern {
    /// Whether a packet of operation `op` whose AETH says `ack` is what this item
    /// names; `holds` answers whether the frame passes a condition (by its text).
    pub(crate) fn matches(
        &self,
        op: &str,
        ack: Option<AckClass>,
        holds: &dyn Fn(&str) -> bool,
    ) -> bool {
        self.alternatives.iter().any(|a| a.matches(op, ack))
            && self.filter.as_deref().is_none_or(holds)
    }
}

/// Why an item of a sequence is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PatternError {
    /// A name that is no opcode or acknowledgement.
    Name(UnknownName),
    /// The condition in braces is no display filter; `at` is the byte of the item
    /// where the condition starts.
    Filter { at: usize, error: Box<FilterError> },
    /// A brace opened and not closed, or text after the closing one.
    Braces(String),
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::Name(n) => n.fmt(f),
            PatternError::Filter { error, .. } => error.kind.fmt(f),
            PatternError::Braces(m) => f.write_str(m),
        }
    }
}

/// How many distinct header conditions one scenario may use (the judge keeps
/// which of them a frame passes in one 64-bit mask).
pub(crate) const MAX_CONDITIONS: usize = 64;

/// What an atom may be, said when a name is not one and no name is close to it.
pub(crate) const ATOMS: &str =
    "an opcode name as `roce decode` prints it without the transport, or ACK, RNR NAK, NAK, NAK <code>";

impl FromStr for Pattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Pattern, PatternError> {
        let t = s.trim_end();
        let (body, repeat) = match (t.strip_suffix('*'), t.strip_suffix('+')) {
            (Some(b), _) => (b, Repeat::Any),
            (_, Some(b)) => (b, Repeat::Some),
            _ => (t, Repeat::One),
        };
        let (names, filter) = match body.find('{') {
            None if body.contains('}') => {
                return Err(PatternError::Braces("a `}` without its `{`".into()))
            }
            None => (body, None),
            Some(open) => {
                let inner = &body[open + 1..];
                let Some(close) = inner.rfind('}') else {
                    return Err(PatternError::Braces(
                        "a `{` without its `}`: a condition is written `NAME {FILTER}`".into(),
                    ));
                };
                if !inner[close + 1..].trim().is_empty() {
                    return Err(PatternError::Braces(format!(
                        "`{}` after the condition: only `*` or `+` may follow the `}}`",
                        inner[close + 1..].trim()
                    )));
                }
                let text = inner[..close].trim();
                let at = open + 1 + (inner[..close].len() - inner[..close].trim_start().len());
                Filter::compile(text)
                    .map_err(|error| PatternError::Filter { at, error: Box::new(error) })?;
                (&body[..open], Some(text.to_string()))
            }
        };
        let alternatives = names
            .split('|')
            .map(str::parse)
            .collect::<Result<Vec<Atom>, UnknownName>>()
            .map_err(PatternError::Name)?;
        Ok(Pattern { alternatives, filter, repeat })
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.alternatives.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            a.fmt(f)?;
        }
        if let Some(c) = &self.filter {
            write!(f, " {{{c}}}")?;
        }
        f.write_str(match self.repeat {
            Repeat::One => "",
            Repeat::Any => "*",
            Repeat::Some => "+",
        })
    }
}

/// `[SEND Only, ACK+]`: the patterns as a list, for the reports.
pub(crate) fn describe(patterns: &[Pattern]) -> String {
    patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
}

/// The whole of `actual` matches the sequence `patterns`; `is` says whether one
/// element is what a pattern names.
pub(crate) fn matches_sequence<T>(
    patterns: &[Pattern],
    actual: &[T],
    is: &dyn Fn(&Pattern, &T) -> bool,
) -> bool {
    let Some((first, rest)) = patterns.split_first() else { return actual.is_empty() };
    let run = actual.iter().take_while(|x| is(first, x)).count();
    match first.repeat {
        Repeat::One => run >= 1 && matches_sequence(rest, &actual[1..], is),
        Repeat::Any => (0..=run).rev().any(|k| matches_sequence(rest, &actual[k..], is)),
        Repeat::Some => (1..=run).rev().any(|k| matches_sequence(rest, &actual[k..], is)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dissector::wire::NakCode;

    /// (operation, AETH class) of a packet.
    type P = (&'static str, Option<AckClass>);

    fn ps(v: &[&str]) -> Vec<Pattern> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn m(p: &[&str], a: &[P]) -> bool {
        matches_sequence(&ps(p), a, &|p, x| p.matches(x.0, x.1, &|_| true))
    }

    const FIRST: P = ("RDMA WRITE First", None);
    const MIDDLE: P = ("RDMA WRITE Middle", None);
    const LAST: P = ("RDMA WRITE Last", None);
    const SEND: P = ("SEND Only", None);
    const ACK: P = ("Acknowledge", Some(AckClass::Ack));
    const RNR: P = ("Acknowledge", Some(AckClass::RnrNak));
    const ACCESS: P = ("Acknowledge", Some(AckClass::Nak(NakCode::RemoteAccessError)));
    const INVALID: P = ("Acknowledge", Some(AckClass::Nak(NakCode::InvalidRequest)));
    const SEQ: P = ("Acknowledge", Some(AckClass::Nak(NakCode::PsnSequenceError)));

    #[test]
    fn sequences_with_repetition() {
        let p = ["RDMA WRITE First", "RDMA WRITE Middle*", "RDMA WRITE Last"];
        assert!(m(&p, &[FIRST, LAST]));
        assert!(m(&p, &[FIRST, MIDDLE, MIDDLE, LAST]));
        assert!(!m(&p, &[FIRST, MIDDLE]));
        assert!(!m(&p, &[FIRST, LAST, LAST]));
        assert!(m(&["SEND Only+"], &[SEND, SEND]));
        assert!(!m(&["SEND Only+"], &[]));
        assert!(m(&["ACK+"], &[ACK, ACK]));
        assert!(m(&[], &[]));
        assert!(!m(&[], &[ACK]));
        // Alternatives, where the spec leaves the device a choice.
        let either = ["NAK Invalid Request | NAK Remote Access Error"];
        assert!(m(&either, &[ACCESS]) && m(&either, &[INVALID]));
        assert!(!m(&either, &[SEQ]) && !m(&either, &[ACK]));
        // A bare NAK is any negative acknowledgement; Acknowledge any at all.
        assert!(m(&["NAK+"], &[RNR, ACCESS]) && !m(&["NAK"], &[ACK]));
        assert!(m(&["Acknowledge+"], &[ACK, RNR]));
        assert!(m(
            &["RDMA WRITE First", "RDMA WRITE Middle | RDMA WRITE Last+"],
            &[FIRST, MIDDLE, LAST, LAST]
        ));
    }

    #[test]
    fn names_come_from_the_dissector_and_print_as_written() {
        for s in [
            "RDMA WRITE Middle | RDMA WRITE Last+",
            "NAK Invalid RD Request",
            "RNR NAK*",
            "ATOMIC Acknowledge",
            "NAK",
        ] {
            assert_eq!(s.parse::<Pattern>().unwrap().to_string(), s);
        }
        assert_eq!("ACK".parse::<Atom>(), Ok(Atom::Ack(AckClass::Ack)));
        let PatternError::Name(e) = "SEND Onyl".parse::<Pattern>().unwrap_err() else {
            panic!("not a name error")
        };
        assert_eq!(e.to_string(), "unknown opcode `SEND Onyl` (did you mean `SEND Only`?)");
        assert!("WRITE".parse::<Pattern>().is_err());
        assert_eq!(describe(&ps(&["SEND Only", "ACK+"])), "SEND Only, ACK+");
    }

    #[test]
    fn a_condition_in_braces_is_a_display_filter_on_the_frame() {
        let p: Pattern = "SEND Only {infiniband.bth.se == 1}+".parse().unwrap();
        assert_eq!(p.filter.as_deref(), Some("infiniband.bth.se == 1"));
        assert_eq!(p.repeat, Repeat::Some);
        assert_eq!(p.to_string(), "SEND Only {infiniband.bth.se == 1}+");
        let se = |c: &str| c == "infiniband.bth.se == 1";
        assert!(p.matches("SEND Only", None, &se));
        assert!(!p.matches("SEND Only", None, &|_| false));
        assert!(!p.matches("SEND Last", None, &se));
        // Several alternatives share one condition; no condition holds everywhere.
        let q: Pattern =
            "RDMA WRITE First | RDMA WRITE Middle {infiniband.bth.padcnt == 0}".parse().unwrap();
        assert_eq!(q.alternatives.len(), 2);
        assert!("ACK".parse::<Pattern>().unwrap().matches(
            "Acknowledge",
            Some(AckClass::Ack),
            &|_| false
        ));
        // A field the dissector does not know: the error says where, in the item.
        match "ACK {infiniband.aeth.msnn == 1}".parse::<Pattern>() {
            Err(PatternError::Filter { at, error }) => {
                assert_eq!(at, 5);
                assert_eq!(error.span.start, 0);
                assert!(error.kind.to_string().contains("infiniband.aeth.msnn"), "{}", error.kind);
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            "ACK {infiniband.bth.se == 1",
            "ACK infiniband.bth.se == 1}",
            "ACK {infiniband.bth.se == 1} x",
        ] {
            assert!(matches!(bad.parse::<Pattern>(), Err(PatternError::Braces(_))), "{bad}");
        }
    }
}
