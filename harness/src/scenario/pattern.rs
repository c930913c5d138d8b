//! The little language of wire expectations: a list of items, each a name with
//! `|` alternatives and a `*` (any number) or `+` (one or more) suffix, matched
//! against the whole sequence of requests or responses.
//!
//! Names come from the dissector's vocabulary, never from a list of our own: an
//! operation of the opcode table (`SEND Only`, `RDMA READ Response Only`,
//! `ATOMIC Acknowledge`, `Acknowledge`), an acknowledgement class (`ACK`, `RNR
//! NAK`, `NAK Remote Access Error`), or a bare `NAK` for any negative one.
//!
//! Owns: [`Pattern`], its atoms and their matching. Imports: dissector's opcode and ACK
//! class, and its [`UnknownName`]; nothing else.
use std::fmt;
use std::str::FromStr;

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
/// `NAK Invalid Request | NAK Remote Access Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    pub(crate) alternatives: Vec<Atom>,
    pub(crate) repeat: Repeat,
}

impl Pattern {
    pub(crate) fn matches(&self, op: &str, ack: Option<AckClass>) -> bool {
        self.alternatives.iter().any(|a| a.matches(op, ack))
    }
}

/// What an atom may be, said when a name is not one and no name is close to it.
pub(crate) const ATOMS: &str =
    "an opcode name as `roce decode` prints it without the transport, or ACK, RNR NAK, NAK, NAK <code>";

impl FromStr for Pattern {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Pattern, UnknownName> {
        let t = s.trim();
        let (body, repeat) = match (t.strip_suffix('*'), t.strip_suffix('+')) {
            (Some(b), _) => (b, Repeat::Any),
            (_, Some(b)) => (b, Repeat::Some),
            _ => (t, Repeat::One),
        };
        let alternatives =
            body.split('|').map(str::parse).collect::<Result<Vec<Atom>, UnknownName>>()?;
        Ok(Pattern { alternatives, repeat })
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
        matches_sequence(&ps(p), a, &|p, x| p.matches(x.0, x.1))
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
        let e = "SEND Onyl".parse::<Pattern>().unwrap_err();
        assert_eq!(e.to_string(), "unknown opcode `SEND Onyl` (did you mean `SEND Only`?)");
        assert!("WRITE".parse::<Pattern>().is_err());
        assert_eq!(describe(&ps(&["SEND Only", "ACK+"])), "SEND Only, ACK+");
    }
}
