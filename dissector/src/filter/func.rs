//! Display filter functions, tshark 4.0's: `len(data.data) > 1000`,
//! `count(ip.addr) == 2`, `upper(frame.protocols) contains "INFINIBAND"`,
//! `string(infiniband.bth.destqp) == "17"`, `max(udp.srcport, udp.dstport) ==
//! 4791`, `abs(…)`.
//!
//! A function's arguments are fields (and, for `len` and `count`, the protocols
//! read as bytes); its values are those of its arguments, made into one value
//! each (`len`, `upper`, `lower`, `string`, `abs`) or one for the frame (`count`,
//! `max`, `min`). What each takes, and what it makes, follows tshark 4.0 (checked
//! against `tshark -Y` in `tests/tests/filter_diff.rs`):
//!
//! - `len`: a value's length in bytes: text and bytes as long as they are, a MAC
//!   6, IPv4 4, IPv6 16, a number the size of tshark's type for it (FT_UINT24: 3),
//!   a flag 0; a protocol its own bytes (`len(ip) == 20`).
//! - `count`: how many values the frame has (none: no value, so `count(x) == 0`
//!   holds nowhere, as in tshark).
//! - `upper`, `lower`: text fields (not columns), ASCII letters only.
//! - `string`: a number in decimal, an address or MAC as written.
//! - `max`, `min`: of every value of every argument, all of one type.
//! - `abs`: a number (ours are all unsigned: itself).
//!
//! Owns: the functions' names, arity and argument rules. Imports: field types
//! ([`crate::fields`]).

use crate::fields::{Field, Ty};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Func {
    Len,
    Count,
    Upper,
    Lower,
    String,
    Max,
    Min,
    Abs,
}

impl Func {
    const ALL: [(&'static str, Func); 8] = [
        ("len", Func::Len),
        ("count", Func::Count),
        ("upper", Func::Upper),
        ("lower", Func::Lower),
        ("string", Func::String),
        ("max", Func::Max),
        ("min", Func::Min),
        ("abs", Func::Abs),
    ];

    /// By its name, as tshark spells it (lower case).
    pub(super) fn lookup(name: &str) -> Option<Func> {
        Func::ALL.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    /// The names, for "did you mean".
    pub(super) fn names() -> impl Iterator<Item = &'static str> {
        Func::ALL.iter().map(|(n, _)| *n)
    }

    /// `len()`, for messages.
    pub(super) fn name(self) -> &'static str {
        match self {
            Func::Len => "len()",
            Func::Count => "count()",
            Func::Upper => "upper()",
            Func::Lower => "lower()",
            Func::String => "string()",
            Func::Max => "max()",
            Func::Min => "min()",
            Func::Abs => "abs()",
        }
    }

    /// `max` and `min` take one argument or more; the others exactly one.
    pub(super) fn takes_many(self) -> bool {
        matches!(self, Func::Max | Func::Min)
    }

    /// The type of the function's values, given its arguments' (one type for
    /// all, `None` for a protocol); `Err` says why the arguments do not do.
    pub(super) fn ty(self, field: Option<Field>) -> Result<Ty, &'static str> {
        let ty = field.map(Field::ty);
        match (self, ty) {
            (Func::Count, _) => Ok(Ty::Uint),
            (Func::Len, Some(Ty::Time)) => Err("the length of a time is not supported"),
            (Func::Len, _) => Ok(Ty::Uint),
            (_, None) => Err("only `len` and `count` take a protocol"),
            (Func::Upper | Func::Lower, Some(Ty::Str))
                if !field.is_some_and(|f| f.name().starts_with("_ws.col.")) =>
            {
                Ok(Ty::Str)
            }
            (Func::Upper | Func::Lower, _) => Err("it takes a text field (not a column)"),
            (Func::String, Some(Ty::Uint | Ty::Ipv4 | Ty::Ipv6 | Ty::Mac)) => Ok(Ty::Str),
            (Func::String, _) => Err("it takes a number, address or MAC field"),
            (
                Func::Max | Func::Min,
                Some(t @ (Ty::Uint | Ty::Ipv4 | Ty::Ipv6 | Ty::Mac | Ty::Time)),
            ) => Ok(t),
            (Func::Max | Func::Min, _) => Err("it takes number, address, MAC or time fields"),
            (Func::Abs, Some(Ty::Uint)) => Ok(Ty::Uint),
            (Func::Abs, _) => Err("it takes a number field"),
        }
    }
}

/// What `len` gives for a number or flag of `field`: the size of tshark's type
/// for it (FT_UINT8 1 … FT_UINT64 8; FT_BOOLEAN 0).
pub(super) fn number_len(field: Field) -> u64 {
    match field.ty() {
        Ty::Bool => 0,
        _ => u64::from(64 - field.max().leading_zeros()).div_ceil(8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_of_numbers_are_their_types() {
        let len = |name| Field::lookup(name).map(number_len).unwrap_or(99);
        assert_eq!(len("infiniband.bth.opcode"), 1);
        assert_eq!(len("udp.port"), 2);
        assert_eq!(len("infiniband.bth.psn"), 3);
        assert_eq!(len("frame.number"), 4);
        assert_eq!(len("infiniband.reth.va"), 8);
        assert_eq!(len("infiniband.bth.a"), 0);
    }
}
