//! Display filters in Wireshark's syntax: `infiniband.aeth.syndrome >= 0x60 &&
//! ip.addr == 10.0.0.0/24`, `not udp.port in {4791, 4792}`, `frame.protocols
//! contains "data"`, `infiniband.aeth.syndrome & 0x60 == 0x60`, `frame contains
//! "rdma-ping"`.
//!
//! A filter is compiled once ([`Filter::compile`]): field names become [`Field`]s,
//! values become typed constants (numbers, addresses, subnets, MACs, times, bytes,
//! text, regular expressions), and every mistake — an unknown field, a value of the
//! wrong type, a relation the field's type has no meaning for — is an error then,
//! naming the column, with the filter shown and a caret under the culprit
//! ([`FilterError`], drawn by [`diag`](crate::diag) as every such mistake is).
//! Evaluating it on a frame ([`Filter::matches`]) reads only the fields it names,
//! through [`fields::visit`] (and the protocols it reads as bytes, through
//! [`ProtoBytes::bytes`]); nothing is allocated per frame
//! (`dissector/tests/filter_alloc.rs`).
//!
//! What the syntax means follows tshark 4.0 (checked against `tshark -Y` on the
//! project's captures, `tests/tests/filter_diff.rs`):
//! - A field that occurs more than once (`ip.addr`, `udp.port`, VLAN IDs) matches
//!   `==` if **any** occurrence is equal; `!=` (`ne`) holds only if **all** are not
//!   equal (tshark 4.0 changed `!=` to mean that; `ip.addr != 10.0.0.1` keeps no
//!   frame between 10.0.0.1 and anyone). `~=`, `!==` and `any_ne` are "any not
//!   equal", `===` and `all_eq` "all equal". `<`, `>`, `<=`, `>=`, `contains`,
//!   `matches` and `in` hold if any occurrence satisfies them. A field the frame does
//!   not have satisfies no relation. `matches` (a regular expression) ignores case,
//!   `contains` does not.
//! - `contains` applies to text, bytes and MACs (`eth.src contains 00:0a`), `matches`
//!   to text, bytes and MACs. On bytes and MACs `matches` reads bytes, as tshark's
//!   PCRE does: `\xff` is the byte 0xff, a MAC is its six bytes (`eth.src matches
//!   "^\\x52\\x54"`, not its text). Everywhere `$` (and `\Z`) also holds before a
//!   newline that ends the value, as in PCRE (`\z` is the very end); `.` is any byte
//!   but a newline.
//! - Byte strings (bytes fields, protocols) order as tshark orders them: the shorter
//!   first, then byte by byte (`infiniband.immdt < 00:00:12:34:00` holds for any
//!   ImmDt). A byte string is written `00:00:12:34` (or `-`, `.`, no separators), or
//!   one byte as `1` or `0xff`; text in quotes is its bytes.
//! - Seven protocols can be read as byte strings ([`ProtoBytes`]): `frame`, `eth`,
//!   `ip`, `ipv6`, `udp`, `infiniband` and `data`. `contains` and `matches` search
//!   from the protocol's first byte to the end of what it covers; `==`, `!=`, `<`, …
//!   and `in` read its own bytes, tshark's tree item. `eth`: the header (14 bytes);
//!   it covers the whole frame, Ethernet padding included. `ip`: the header (options
//!   included) to the end of its total length (not the padding). `ipv6`: the header
//!   and extension headers, to the end of its payload length. `udp`: the 8-byte
//!   header, to the end of the IP payload (past a shorter UDP length).
//!   `infiniband`: BTH to ICRC (RoCEv1: the GRH to the end of the frame). `data`:
//!   the bytes no dissector claims — a RoCE payload **with its pad**, without the
//!   ICRC; a TCP payload. `frame`: every captured byte. Other protocols (`tcp`,
//!   `vlan`, …) and headers (`infiniband.reth`) are present or not.
//! - A slice `NAME[…]` reads some of a value's bytes ([`slice`]: `[i:len]`,
//!   `[i-j]` with `j` included, `[i]`, `[i:]`, `[:len]`, negative offsets from the
//!   end, parts joined with `,`): of a byte, text, MAC, IPv4 or IPv6 field, or of a
//!   protocol's own bytes (`eth[0:2]`, `udp[2:2]`, `frame[-4:]`). A slice is a byte
//!   string: compared, `contains`, `matches`, masked; alone it holds when not
//!   empty. A part past the value's end ends the slice (`eth.src[7:1]` is empty),
//!   as in tshark; no `in` after a slice, no slice on the value's side.
//! - `FIELD & MASK` (or `bitwise_and`) holds when the field ANDed with the mask is
//!   not zero; `FIELD & MASK REL VALUE` compares the AND (`infiniband.aeth.syndrome &
//!   0x60 == 0x60`: a NAK). Masks may follow one another (`& 0x60 & 0x20`). Byte
//!   strings (byte fields, slices) and MACs take a byte mask and are ANDed byte by
//!   byte, as long as the shorter (`eth.dst[0] & 1`: multicast; a whole MAC's mask
//!   is a MAC). As in tshark 4.0: a mask, and a number a masked field
//!   is compared with, fit the field's type (FT_UINT8: at most 255, [`Field::max`]);
//!   no `in`, `contains` or `matches` after a mask, no parentheses around
//!   `FIELD & MASK` before a comparison, and no `bitand` (tshark's word is
//!   `bitwise_and`).
//! - Functions ([`func`]): `len(data.data) > 1000`, `count(ip.addr) == 2`,
//!   `upper(…)`, `lower(…)`, `string(infiniband.bth.destqp) == "17"`, `max(…)`,
//!   `min(…)`, `abs(…)`, of fields (and, for `len` and `count`, the protocols read
//!   as bytes), on either side of a comparison (`data.len == len(data.data)`); a
//!   number function takes a mask. Not alone (a function's value is compared), not
//!   before `in`.
//! - `and`/`&&` binds tighter than `or`/`||`; `not`/`!` tighter than both, and `!`
//!   takes a whole masked test (`!infiniband.aeth.syndrome & 0x60`).
//! - A bare field, protocol or header name (`infiniband`, `ip`, `udp`, `tcp`,
//!   `vlan`, `data`, `infiniband.reth`, `infiniband.aeth.syndrome`, …) means
//!   "present". Protocol names are those of `frame.protocols`, plus our own `roce`
//!   (a decoded BTH), `roce.icrc` (the ICRC was captured and checked) and `roce.dc`
//!   (read as DC); header names are tshark's ([`Header::ALL`]): a header is present
//!   when it was decoded in full.
//! - Numbers in decimal, `0x` hex, or octal with a leading `0` (`010` is 8, as in
//!   tshark). Flags (`infiniband.bth.a`) compare with `1`/`0` or `true`/`false`.
//!   Addresses and subnets (`10.0.0.0/24`, `fd00::/64`), MACs (`02:00:00:00:00:01`,
//!   `02-00-…`, `0200.0000.0001`), times in seconds (`frame.time_delta > 0.0005`),
//!   bytes (`infiniband.immdt == 00:00:12:34`), text in double quotes.
//! - A value that is itself a field name compares the two fields
//!   (`frame.cap_len < frame.len`).
//!
//! Beyond tshark 4.0: set members may be apart by white space (`{4 10 0x11..0x13}`;
//! tshark wants commas), and text fields of ours (`roce.opcode.name`,
//! `_ws.col.Info`) can be filtered on.
//!
//! Short of tshark 4.0, refused with an error: a field or an address as a mask
//! (`udp.port & udp.length`, `ip.src & 255.0.0.0`), a mask
//! on the value's side (`== 0x60 & 0x60`), the bytes of other protocols and of
//! headers (`tcp contains …`, `infiniband.reth == …`, `infiniband.reth[0]`), negative
//! numbers (`data.len > -1`), a field or slice compared with a slice
//! (`frame[0:6] == eth.dst`), arithmetic (`len(ip.src) - 2`), and the length of
//! protocols not read as bytes (`len(vlan)`). `(` and `not` nest at most 256 deep
//! (tshark 4.0 stops sooner); `and` and `or` chains are lists, of any length.
//! Numbers compared with a field without a mask are not checked against the field's
//! type (tshark refuses `udp.port == 70000`; we keep no frame).
//!
//! Owns: what a filter means, its compilation and its errors. Imports: the fields
//! ([`crate::fields`]: names, types, values, `visit`, protocols and their bytes), the per-frame context, the text
//! parsers ([`crate::text`]), MACs ([`crate::wire`]) and the report an error renders
//! through ([`crate::diag`]).

mod func;
mod lex;
mod parse;
mod slice;

use core::cmp::Ordering;
use core::fmt;
use core::ops::Range;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use func::Func;
pub use lex::Rel;
use parse::{Expr, Operand, Rhs as PRhs, SetElem};
use slice::Slice;

use crate::ctx::{Ctx, Shown};
use crate::diag;
use crate::fields::{self, Field, Header, ProtoBytes, Protocols, Ty, Value};
use crate::text::{did_you_mean, hex_bytes, parse_u64};

/// Names a bare test can use besides fields: the protocols `frame.protocols` lists,
/// and three of ours. With what each means.
pub const PROTOCOLS: &[(&str, &str)] = &[
    ("frame", "every frame"),
    ("eth", "Ethernet"),
    ("ethertype", "never: tshark 4.0 lists it in frame.protocols but not in the tree"),
    ("vlan", "an 802.1Q tag"),
    ("ieee8021ad", "an 802.1ad (QinQ outer) tag"),
    ("sll", "a Linux cooked capture header"),
    ("raw", "raw IP, no link header"),
    ("null", "BSD loopback header"),
    ("ip", "IPv4"),
    ("ipv6", "IPv6"),
    ("udp", "UDP"),
    ("tcp", "TCP"),
    ("arp", "ARP"),
    ("lldp", "LLDP"),
    ("infiniband", "InfiniBand transport (RoCEv2 or RoCEv1)"),
    ("data", "payload bytes no dissector claims (after infiniband: a RoCE payload and its pad)"),
    ("roce", "a RoCE packet whose BTH decoded"),
    ("roce.icrc", "a RoCE packet whose ICRC was captured (and checked: see roce.icrc.status)"),
    ("roce.dc", "a packet read as mlx5 Dynamically Connected transport"),
];

/// What went wrong in a display filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    BadCharacter {
        c: char,
    },
    SingleEquals,
    SingleAmpersandOrBar {
        c: char,
    },
    UnterminatedString,
    Unexpected {
        found: String,
        expected: &'static str,
    },
    EndTooSoon {
        expected: &'static str,
    },
    UnclosedParen,
    UnbalancedParen,
    UnclosedBrace,
    EmptySet,
    HalfRange,
    UnknownField {
        name: String,
        suggestion: Option<&'static str>,
    },
    /// A quoted string where a field or protocol name belongs.
    QuotedName,
    /// `ip == …`: a protocol has no value.
    ProtocolCompared {
        name: String,
    },
    BadValue {
        field: &'static str,
        ty: Ty,
        text: String,
        why: &'static str,
    },
    /// `ip.src == "10.0.0.1"`: quotes make text, and the field is not text.
    QuotedValue {
        field: &'static str,
        ty: Ty,
    },
    RelNotForType {
        rel: Rel,
        field: &'static str,
        ty: Ty,
    },
    /// `ip.addr > 10.0.0.0/24`, `ip.addr in {10.0.0.0/8 .. 10.0.0.5}`.
    SubnetOrdered,
    BadRegex {
        error: String,
    },
    FieldTypesDiffer {
        left: &'static str,
        left_ty: Ty,
        right: &'static str,
        right_ty: Ty,
    },
    /// Two text or byte fields compared with each other.
    FieldPairNotSupported {
        ty: Ty,
    },
    /// `infiniband.bth.a & 1`, `ip & 1`: `&` takes integer fields.
    MaskNotForType {
        name: String,
        what: &'static str,
    },
    /// `& "x"`, `& udp.port`: a mask is a number.
    BadMask {
        text: String,
        why: &'static str,
    },
    /// `infiniband.aeth.syndrome & 0x1ff`: more than the field's type holds.
    TooBig {
        text: String,
        field: &'static str,
        max: u64,
    },
    /// `… == 0x60 & 0x60`: a mask on the value's side.
    MaskOnValue,
    /// `eth.src[0:3`: no `]`.
    UnclosedBracket,
    /// `eth.src[2-1]`, `eth.src[0:0]`, `eth.src[a:2]`.
    BadSlice {
        text: String,
        why: String,
    },
    /// `udp.port[0]`: only bytes, text, addresses and protocols can be sliced.
    SliceNotForType {
        name: String,
        what: &'static str,
    },
    /// `frame[0:2] == eth.src[0:2]`: a slice on the value's side.
    SliceOnValue,
    /// `eth.src[0:1] in {…}`, `len(x) in {…}`: tshark 4.0 tests only a field for
    /// membership.
    InNeedsField,
    /// `foo(ip.addr)`.
    UnknownFunction {
        name: String,
        suggestion: Option<&'static str>,
    },
    /// `upper(udp.port)`, `len(1)`, `len(a, b)`.
    BadArgument {
        func: &'static str,
        text: String,
        why: &'static str,
    },
    /// `len(data.data)` alone: a function's value is compared, not tested.
    FunctionAlone,
    /// More than [`parse::MAX_DEPTH`] `(` and `not` nested.
    TooDeep {
        max: usize,
    },
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::BadCharacter { c } => write!(f, "`{c}` has no meaning in a display filter"),
            ErrorKind::SingleEquals => f.write_str("a single `=` is not a comparison"),
            ErrorKind::SingleAmpersandOrBar { c } => write!(f, "a single `{c}` is not an operator"),
            ErrorKind::UnterminatedString => f.write_str("this string has no closing `\"`"),
            ErrorKind::Unexpected { found, expected } => {
                write!(f, "expected {expected}, found {found}")
            }
            ErrorKind::EndTooSoon { expected } => {
                write!(f, "the filter ends where {expected} should follow")
            }
            ErrorKind::UnclosedParen => f.write_str("this `(` is never closed"),
            ErrorKind::UnbalancedParen => f.write_str("this `)` closes nothing"),
            ErrorKind::UnclosedBrace => f.write_str("this `{` is never closed"),
            ErrorKind::EmptySet => f.write_str("an empty set matches nothing"),
            ErrorKind::HalfRange => f.write_str("a range needs a value on both sides of `..`"),
            ErrorKind::UnknownField { name, .. } => write!(f, "unknown field or protocol `{name}`"),
            ErrorKind::QuotedName => {
                f.write_str("a field or protocol name is written without quotes")
            }
            // tshark compares a header's bytes (FT_BYTES); we test only its presence.
            ErrorKind::ProtocolCompared { name } if Header::lookup(name).is_some() => {
                write!(
                    f,
                    "`{name}` is a header: it is present or not; its bytes cannot be compared"
                )
            }
            ErrorKind::ProtocolCompared { name } => {
                write!(
                    f,
                    "`{name}` is a protocol we cannot read as bytes: it is present or not \
                     (of the protocols, {} can be compared as bytes)",
                    byte_protocols()
                )
            }
            ErrorKind::BadValue { field, ty, text, why } => {
                write!(f, "`{text}` is not a valid {ty} for {field}: {why}")
            }
            ErrorKind::QuotedValue { field, ty } => {
                write!(f, "{field} is a {ty}, not text: the value must not be in quotes")
            }
            ErrorKind::RelNotForType { rel, field, ty } => {
                write!(f, "`{}` does not apply to {field}, a {ty}", rel.symbol())
            }
            ErrorKind::SubnetOrdered => {
                f.write_str("a subnet has no order: compare it with `==` or `!=`")
            }
            ErrorKind::BadRegex { error } => write!(f, "not a regular expression: {error}"),
            ErrorKind::FieldTypesDiffer { left, left_ty, right, right_ty } => {
                write!(f, "{left} (a {left_ty}) cannot be compared with {right} (a {right_ty})")
            }
            ErrorKind::FieldPairNotSupported { ty } => {
                write!(f, "comparing two {ty} fields with each other is not supported")
            }
            ErrorKind::MaskNotForType { name, what } => {
                write!(f, "`&` (bitwise and) does not apply to {name}, a {what}")
            }
            ErrorKind::BadMask { text, why } => write!(f, "`{text}` is not a mask: {why}"),
            ErrorKind::TooBig { text, field, max } => {
                write!(f, "`{text}` is too big for {field}: its largest value is {max}")
            }
            ErrorKind::MaskOnValue => {
                f.write_str("`&` applies to the field on the left, not to the value compared with")
            }
            ErrorKind::UnclosedBracket => f.write_str("this `[` is never closed"),
            ErrorKind::BadSlice { text, why } => write!(f, "`{text}` is not a slice: {why}"),
            ErrorKind::SliceNotForType { name, what } => {
                write!(f, "{name} ({what}) cannot be sliced into bytes")
            }
            ErrorKind::SliceOnValue => {
                f.write_str("bytes read this way compare with bytes written out: a field or a slice on the value's side is not supported")
            }
            ErrorKind::InNeedsField => {
                f.write_str("only a field can be tested for membership in a set (tshark 4.0), not a slice or a function's value")
            }
            ErrorKind::UnknownFunction { name, .. } => write!(f, "unknown function `{name}`"),
            ErrorKind::BadArgument { func, text, why } => {
                write!(f, "`{text}` is not an argument {func} takes: {why}")
            }
            ErrorKind::FunctionAlone => {
                f.write_str("a function's value is compared, not tested alone")
            }
            ErrorKind::TooDeep { max } => {
                write!(f, "`(` and `not` nest more than {max} deep here")
            }
        }
    }
}

impl ErrorKind {
    /// What to do about it, where there is something to say.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            ErrorKind::SingleEquals => "write `==` (or `eq`)".into(),
            ErrorKind::SingleAmpersandOrBar { c } => format!("write `{c}{c}`, or `or`"),
            ErrorKind::BadCharacter { .. } => {
                "fields, values, `== != < > <= >= contains matches in`, `&`, `and or not`, `( )`, `{ }` and slices `[i:j]` make a filter".into()
            }
            ErrorKind::UnknownField { suggestion: Some(s), .. } => {
                format!("did you mean `{s}`? (`roce decode -G fields` lists the fields)")
            }
            ErrorKind::UnknownField { suggestion: None, .. } => {
                "`roce decode -G fields` lists the fields; protocols are those of frame.protocols".into()
            }
            ErrorKind::ProtocolCompared { name } => format!("test `{name}` alone, or compare one of its fields"),
            ErrorKind::BadValue { ty, .. } => example(*ty).into(),
            ErrorKind::QuotedValue { ty, .. } => format!("{} (no quotes)", example(*ty)),
            ErrorKind::RelNotForType { rel: Rel::Contains | Rel::Matches, .. } => {
                format!(
                    "`contains` and `matches` apply to text, bytes and MAC fields, and to the protocols {}",
                    byte_protocols()
                )
            }
            ErrorKind::RelNotForType { .. } => "compare it with `==` or `!=`".into(),
            ErrorKind::EmptySet => "put at least one value between the braces".into(),
            ErrorKind::FieldTypesDiffer { .. } => "a field can be compared with a field of its own type".into(),
            ErrorKind::MaskNotForType { .. } => {
                "`&` applies to integer fields: `infiniband.aeth.syndrome & 0x60`".into()
            }
            ErrorKind::BadMask { .. } => {
                "a mask is a number in decimal, 0x hex or octal: `infiniband.aeth.syndrome & 0x60`".into()
            }
            ErrorKind::TooBig { .. } => "the field's type (as tshark types it) holds no larger value".into(),
            ErrorKind::MaskOnValue => {
                "compare with the value itself: `infiniband.aeth.syndrome & 0x60 == 0x60`".into()
            }
            ErrorKind::UnclosedBracket | ErrorKind::BadSlice { .. } => SLICE_FORMS.into(),
            ErrorKind::SliceNotForType { .. } => format!(
                "slices apply to byte, text, MAC and address fields, and to the protocols {}",
                byte_protocols()
            ),
            ErrorKind::SliceOnValue => "compare the slice with bytes: `eth.src[0:3] == 52:54:00`".into(),
            ErrorKind::InNeedsField => {
                "compare with each value: `eth.src[0] == 52 or eth.src[0] == 02`".into()
            }
            ErrorKind::UnknownFunction { suggestion: Some(s), .. } => {
                format!("did you mean `{s}`? {}", functions())
            }
            ErrorKind::UnknownFunction { suggestion: None, .. } | ErrorKind::BadArgument { .. } => {
                functions()
            }
            ErrorKind::FunctionAlone => "compare it: `len(data.data) > 0`, `count(ip.addr) == 2`".into(),
            _ => return None,
        })
    }
}

/// The functions and what they take, from their own table and the protocols'.
fn functions() -> String {
    let names: Vec<String> = func::Func::names().map(|n| format!("{n}()")).collect();
    format!(
        "the functions are {}; their arguments are fields (len and count: also {})",
        names.join(", "),
        byte_protocols()
    )
}

const SLICE_FORMS: &str = "a slice is `[start:length]`, `[start-end]` (end included), `[start]`, `[start:]` or `[:length]`; a negative offset counts from the end; parts join with `,`";

/// `frame, eth, ip, ipv6, udp, infiniband and data`.
fn byte_protocols() -> String {
    let names: Vec<&str> = ProtoBytes::ALL.iter().map(|(n, _)| *n).collect();
    match names.split_last() {
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn example(ty: Ty) -> &'static str {
    match ty {
        Ty::Uint => "write a number in decimal, 0x hex, or octal with a leading 0",
        Ty::Bool => "write 1 or 0 (or true, false)",
        Ty::Ipv4 => "write an address like 10.0.0.1 or a subnet like 10.0.0.0/24",
        Ty::Ipv6 => "write an address like fd00::1 or a subnet like fd00::/64",
        Ty::Mac => "write six hex bytes like 02:00:00:00:00:01",
        Ty::Time => "write seconds, e.g. 0.000250",
        Ty::Bytes => "write hex bytes like 00:00:12:34",
        Ty::Str => "write text in double quotes",
    }
}

/// A display filter that did not compile: what, and where in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// The whole filter, as given.
    pub filter: String,
    /// The bytes of the filter the error is about.
    pub span: Range<usize>,
    pub kind: ErrorKind,
    /// Where the filter came from (`-Y`); shown as "display filter" when unset.
    pub origin: Option<&'static str>,
}

impl FilterError {
    pub(crate) fn new(filter: &str, span: Range<usize>, kind: ErrorKind) -> FilterError {
        let end = span.end.min(filter.len());
        FilterError {
            filter: filter.to_string(),
            span: span.start.min(end)..end,
            kind,
            origin: None,
        }
    }

    /// 1-based column, in characters, where the error starts.
    pub fn column(&self) -> usize {
        self.filter.get(..self.span.start).map_or(0, |s| s.chars().count()) + 1
    }
}

/// Through [`diag::Report`](crate::diag::Report), as every mistake in text a user
/// gave:
///
/// ```text
/// error: unknown field or protocol `infiniband.bth.destqpn`
///  --> -Y:1:1
///   |
/// 1 | infiniband.bth.destqpn == 5
///   | ^^^^^^^^^^^^^^^^^^^^^^
///   |
///   = hint: did you mean `infiniband.bth.destqp`? (…)
/// ```
impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = self.kind.to_string();
        let hint = self.kind.hint();
        let report = diag::Report {
            message: &message,
            origin: Some(diag::Origin::Named(self.origin.unwrap_or("display filter"))),
            excerpt: Some(diag::Excerpt {
                text: &self.filter,
                first_line: 1,
                span: self.span.clone(),
            }),
            hint: hint.as_deref(),
        };
        f.write_str(&report.render())
    }
}

impl std::error::Error for FilterError {}

/// A typed constant from the filter text.
#[derive(Debug, Clone)]
enum Const {
    U(u64),
    V4 {
        addr: u32,
        mask: u32,
    },
    V6 {
        addr: u128,
        mask: u128,
    },
    Mac(u64),
    Time(i64),
    Bytes(Vec<u8>),
    Str(String),
    Re(regex::Regex),
    /// A regular expression over bytes (a MAC, a byte field, a protocol's bytes).
    ReBytes(regex::bytes::Regex),
}

/// One value of a field during evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scalar<'a> {
    U(u64),
    V4(u32),
    V6(u128),
    Mac(u64),
    Time(i64),
    Bytes(&'a [u8]),
    /// Bytes of this length, not all captured (a protocol's header cut short): only
    /// a value of another length compares with it.
    Cut(usize),
    Str(&'a str),
}

impl Scalar<'_> {
    /// A copy that borrows nothing; `None` for text and bytes.
    fn owned(self) -> Option<Scalar<'static>> {
        Some(match self {
            Scalar::U(v) => Scalar::U(v),
            Scalar::V4(v) => Scalar::V4(v),
            Scalar::V6(v) => Scalar::V6(v),
            Scalar::Mac(v) => Scalar::Mac(v),
            Scalar::Time(v) => Scalar::Time(v),
            Scalar::Bytes(_) | Scalar::Cut(_) | Scalar::Str(_) => return None,
        })
    }

    fn cmp_same(&self, o: &Scalar<'_>) -> Option<Ordering> {
        Some(match (self, o) {
            (Scalar::U(a), Scalar::U(b)) | (Scalar::Mac(a), Scalar::Mac(b)) => a.cmp(b),
            (Scalar::Time(a), Scalar::Time(b)) => a.cmp(b),
            (Scalar::V4(a), Scalar::V4(b)) => a.cmp(b),
            (Scalar::V6(a), Scalar::V6(b)) => a.cmp(b),
            // As tshark 4.0 orders byte strings: the shorter first, then byte by byte
            // (`infiniband.immdt < 00:00:12:34:00` holds for any ImmDt).
            (Scalar::Bytes(a), Scalar::Bytes(b)) => a.len().cmp(&b.len()).then_with(|| a.cmp(b)),
            (Scalar::Cut(n), Scalar::Bytes(b)) if *n != b.len() => n.cmp(&b.len()),
            (Scalar::Bytes(b), Scalar::Cut(n)) if *n != b.len() => b.len().cmp(n),
            (Scalar::Str(a), Scalar::Str(b)) => a.cmp(b),
            _ => return None,
        })
    }
}

fn mac_u64(m: crate::wire::ethernet::Mac) -> u64 {
    m.0.iter().fold(0u64, |a, &b| a << 8 | u64::from(b))
}

/// The six bytes of a MAC held as a number.
fn mac_bytes(m: u64) -> [u8; 6] {
    let b = m.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

impl Const {
    fn eq(&self, s: &Scalar<'_>) -> bool {
        match (self, s) {
            (Const::V4 { addr, mask }, Scalar::V4(v)) => v & mask == addr & mask,
            (Const::V6 { addr, mask }, Scalar::V6(v)) => v & mask == addr & mask,
            (Const::Re(_) | Const::ReBytes(_), _) => false,
            _ => self.cmp(s) == Some(Ordering::Equal),
        }
    }

    /// The order of `s` relative to the constant (`s.cmp(self)`).
    fn cmp(&self, s: &Scalar<'_>) -> Option<Ordering> {
        let c = match self {
            Const::U(v) => Scalar::U(*v),
            Const::V4 { addr, .. } => Scalar::V4(*addr),
            Const::V6 { addr, .. } => Scalar::V6(*addr),
            Const::Mac(v) => Scalar::Mac(*v),
            Const::Time(v) => Scalar::Time(*v),
            Const::Bytes(b) => Scalar::Bytes(b),
            Const::Str(t) => Scalar::Str(t),
            Const::Re(_) | Const::ReBytes(_) => return None,
        };
        s.cmp_same(&c)
    }

    fn contains(&self, s: &Scalar<'_>) -> bool {
        let within = |c: &[u8], v: &[u8]| c.is_empty() || v.windows(c.len()).any(|w| w == c);
        match (self, s) {
            (Const::Str(c), Scalar::Str(v)) => v.contains(c.as_str()),
            (Const::Bytes(c), Scalar::Bytes(v)) => within(c, v),
            (Const::Bytes(c), Scalar::Mac(m)) => within(c, &mac_bytes(*m)),
            (Const::Str(c), Scalar::Bytes(v)) => {
                v.windows(c.len().max(1)).any(|w| w == c.as_bytes())
            }
            _ => false,
        }
    }

    fn matches(&self, s: &Scalar<'_>) -> bool {
        match (self, s) {
            (Const::Re(re), Scalar::Str(v)) => re.is_match(v),
            (Const::ReBytes(re), Scalar::Bytes(v)) => re.is_match(v),
            (Const::ReBytes(re), Scalar::Mac(m)) => re.is_match(&mac_bytes(*m)),
            _ => false,
        }
    }

    fn is_subnet(&self) -> bool {
        matches!(self, Const::V4 { mask, .. } if *mask != u32::MAX)
            || matches!(self, Const::V6 { mask, .. } if *mask != u128::MAX)
    }
}

#[derive(Debug, Clone)]
enum Item {
    One(Const),
    Range(Const, Const),
}

#[derive(Debug, Clone)]
enum Rhs {
    One(Const),
    Set(Vec<Item>),
    /// The values of a field or function: each pair of values is compared.
    Values(Target),
}

/// What a comparison reads: a field's values, a protocol's bytes, or the values
/// of a function (`index` into [`Filter::calls`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Field(Field),
    Proto(ProtoBytes),
    Call { index: usize, func: Func, ty: Ty },
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Field(f) => f.name(),
            Target::Proto(p) => p.name(),
            Target::Call { func, .. } => func.name(),
        }
    }

    fn ty(self) -> Ty {
        match self {
            Target::Field(f) => f.ty(),
            Target::Proto(_) => Ty::Bytes,
            Target::Call { ty, .. } => ty,
        }
    }
}

/// A function and its arguments (fields, or protocols read as bytes).
#[derive(Debug, Clone)]
struct Call {
    func: Func,
    args: Box<[Target]>,
}

impl Call {
    /// The arguments that are fields (those of all but `len` and `count`).
    fn fields(&self) -> impl Iterator<Item = Field> + '_ {
        self.args.iter().filter_map(|a| match a {
            Target::Field(f) => Some(*f),
            _ => None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    /// A name of `frame.protocols`.
    Named(&'static str),
    /// A header tshark names as a whole (`infiniband.reth`).
    Header(Header),
    Frame,
    Roce,
    RoceIcrc,
    RoceDc,
    /// `ethertype`: tshark names it in `frame.protocols` but adds no tree item,
    /// so `tshark -Y ethertype` keeps no frame.
    Never,
}

#[derive(Debug, Clone)]
enum Node {
    True,
    /// Two or more, as the parser listed them.
    Or(Vec<Node>),
    And(Vec<Node>),
    Not(Box<Node>),
    Proto(Proto),
    Present(Field),
    /// `field & mask`: some value ANDed with the mask is not zero.
    BitTest {
        field: Field,
        mask: u64,
    },
    /// `target REL rhs`; a field's (number) values ANDed with `mask` first.
    Cmp {
        target: Target,
        mask: Option<u64>,
        rel: Rel,
        rhs: Rhs,
    },
    /// Each value's bytes as `view` makes them, compared as bytes (`test`) or,
    /// alone, present: a slice not empty (`target[…]`), an AND not all zero
    /// (`target[…] & MASK`, `target & MASK`). Boxed: rare, and the common nodes
    /// stay small.
    Bytewise {
        target: Target,
        view: Box<View>,
        test: Option<(Rel, Rhs)>,
    },
}

/// The bytes a test reads of a value: a slice of them, then ANDed byte by byte
/// with a mask (as tshark 4.0 ANDs byte strings: as long as the shorter of the
/// two).
#[derive(Debug, Clone)]
struct View {
    slice: Option<Slice>,
    mask: Option<Box<[u8]>>,
}

/// A compiled display filter. Cheap to evaluate; not shared between threads (it
/// keeps one buffer for formatting text fields): each thread evaluates a clone.
#[derive(Debug, Clone)]
pub struct Filter {
    text: String,
    root: Node,
    scratch: RefCell<String>,
    /// The joined parts of a slice of more than one part.
    sliced: RefCell<Vec<u8>>,
    /// A value's bytes ANDed with a mask.
    masked: RefCell<Vec<u8>>,
    /// The function calls the filter makes, in the order compiled.
    calls: Box<[Call]>,
    /// The text a function makes of a value (`upper`, `string`).
    made: RefCell<String>,
}

impl Filter {
    /// Compiles `text`. An empty (or all white space) filter keeps every frame, as
    /// tshark's `-Y ""` does.
    pub fn compile(text: &str) -> Result<Filter, FilterError> {
        let compiler = Compiler { text, calls: RefCell::new(Vec::new()) };
        let root = if text.trim().is_empty() {
            Node::True
        } else {
            let toks = lex::lex(text)?;
            let expr = parse::parse(text, toks)?;
            compiler.expr(&expr)?
        };
        Ok(Filter {
            text: text.to_string(),
            root,
            scratch: RefCell::new(String::new()),
            sliced: RefCell::new(Vec::new()),
            masked: RefCell::new(Vec::new()),
            calls: compiler.calls.into_inner().into_boxed_slice(),
            made: RefCell::new(String::new()),
        })
    }

    /// The filter as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the filter reads `field` anywhere (e.g. `frame.time_delta_displayed`,
    /// whose value depends on what the filter kept before).
    pub fn uses(&self, field: Field) -> bool {
        self.node_uses(&self.root, field)
    }

    fn node_uses(&self, n: &Node, field: Field) -> bool {
        match n {
            Node::True | Node::Proto(_) => false,
            Node::Or(all) | Node::And(all) => all.iter().any(|n| self.node_uses(n, field)),
            Node::Not(a) => self.node_uses(a, field),
            Node::Present(f) | Node::BitTest { field: f, .. } => *f == field,
            Node::Cmp { target, rhs, .. } => {
                self.reads(*target, field) || matches!(rhs, Rhs::Values(t) if self.reads(*t, field))
            }
            Node::Bytewise { target, .. } => self.reads(*target, field),
        }
    }

    /// `target` is `field`, or a function of it.
    fn reads(&self, target: Target, field: Field) -> bool {
        match target {
            Target::Field(f) => f == field,
            Target::Proto(_) => false,
            Target::Call { index, .. } => self.calls[index].args.contains(&Target::Field(field)),
        }
    }

    /// Whether the frame of `c` passes, every frame taken as displayed (see
    /// [`Shown`]; only `frame.time_delta_displayed` depends on it).
    pub fn matches(&self, c: &Ctx<'_>) -> bool {
        self.matches_shown(c, Shown::every(c))
    }

    /// [`Filter::matches`] for a caller that knows what it displayed before.
    pub fn matches_shown(&self, c: &Ctx<'_>, shown: Shown) -> bool {
        self.eval(&self.root, c, shown)
    }

    fn eval(&self, n: &Node, c: &Ctx<'_>, shown: Shown) -> bool {
        match n {
            Node::True => true,
            Node::Or(all) => all.iter().any(|n| self.eval(n, c, shown)),
            Node::And(all) => all.iter().all(|n| self.eval(n, c, shown)),
            Node::Not(a) => !self.eval(a, c, shown),
            Node::Proto(p) => match p {
                Proto::Named(name) => Protocols(c).has(name),
                Proto::Header(h) => h.present(c.frame),
                Proto::Frame => true,
                Proto::Never => false,
                Proto::Roce => c.frame.ib.is_some(),
                Proto::RoceIcrc => c.frame.icrc_check(c.data).is_some(),
                Proto::RoceDc => c.frame.ib.as_ref().is_some_and(|i| i.is_dc()),
            },
            Node::Present(f) => {
                let mut any = false;
                fields::visit(*f, c, shown, |_| any = true);
                any
            }
            Node::BitTest { field, mask } => {
                let mut any = false;
                self.each(*field, c, shown, |s| any |= matches!(s, Scalar::U(v) if v & mask != 0));
                any
            }
            Node::Cmp { target, mask, rel, rhs: Rhs::Values(other) } => {
                self.pair(*target, *mask, *rel, *other, c, shown)
            }
            Node::Bytewise { target, view, test: None } => {
                let mut any = false;
                let masked = view.mask.is_some();
                self.view(*target, view, c, shown, &mut |b| {
                    any |= if masked { b.iter().any(|&x| x != 0) } else { !b.is_empty() }
                });
                any
            }
            Node::Bytewise { target, view, test: Some((rel, rhs)) } => {
                let mut seen = Seen::default();
                self.view(*target, view, c, shown, &mut |b| {
                    seen.add(test(*rel, rhs, &Scalar::Bytes(b)))
                });
                seen.holds(*rel)
            }
            Node::Cmp { target, mask, rel, rhs } => {
                let mut seen = Seen::default();
                let mut one = |s: Scalar<'_>| {
                    let s = match (s, mask) {
                        (Scalar::U(v), Some(m)) => Scalar::U(v & m),
                        _ => s,
                    };
                    let p = test(*rel, rhs, &s);
                    seen.add(p);
                };
                match target {
                    Target::Field(f) => self.each(*f, c, shown, one),
                    Target::Call { index, .. } => {
                        self.call(&self.calls[*index], c, shown, &mut one)
                    }
                    Target::Proto(p) => {
                        if let Some(b) = p.bytes(c) {
                            // `contains` and `matches` search all the protocol
                            // covers; the comparisons read its own bytes.
                            one(match rel {
                                Rel::Contains | Rel::Matches => Scalar::Bytes(b.covered),
                                _ if b.cut() => Scalar::Cut(b.own),
                                _ => Scalar::Bytes(b.own()),
                            })
                        }
                    }
                }
                seen.holds(*rel)
            }
        }
    }

    /// Calls `f` with each value of `field` as a scalar; text made on demand goes
    /// through the filter's one buffer.
    fn each(&self, field: Field, c: &Ctx<'_>, shown: Shown, mut f: impl FnMut(Scalar<'_>)) {
        fields::visit(field, c, shown, |v| match v {
            Value::Dec(x) | Value::Hex(x, _) => f(Scalar::U(x)),
            Value::Bool(b) => f(Scalar::U(b.into())),
            Value::Ipv4(a) => f(Scalar::V4(a.into())),
            Value::Ipv6(a) => f(Scalar::V6(a.into())),
            Value::Mac(m) => f(Scalar::Mac(mac_u64(m))),
            Value::Secs(ns) => f(Scalar::Time(ns)),
            Value::Bytes(b) => f(Scalar::Bytes(b)),
            Value::Str(s) => f(Scalar::Str(s)),
            Value::Text(t) => {
                let mut buf = self.scratch.borrow_mut();
                buf.clear();
                let _ = write!(buf, "{t}");
                f(Scalar::Str(&buf))
            }
        })
    }

    /// Calls `f` with the bytes `view` makes of each value of `target` (a
    /// protocol: of its own bytes, as far as captured).
    fn view(
        &self,
        target: Target,
        view: &View,
        c: &Ctx<'_>,
        shown: Shown,
        f: &mut dyn FnMut(&[u8]),
    ) {
        let mut cut = |v: &[u8]| {
            let mut sliced = self.sliced.borrow_mut();
            let v = match &view.slice {
                Some(s) => s.apply(v, &mut sliced),
                None => v,
            };
            match &view.mask {
                Some(m) => {
                    let mut and = self.masked.borrow_mut();
                    and.clear();
                    and.extend(v.iter().zip(m.iter()).map(|(a, b)| a & b));
                    f(&and)
                }
                None => f(v),
            }
        };
        match target {
            Target::Field(field) => self.each(field, c, shown, |s| match s {
                Scalar::Bytes(b) => cut(b),
                Scalar::Str(t) => cut(t.as_bytes()),
                Scalar::Mac(m) => cut(&mac_bytes(m)),
                Scalar::V4(a) => cut(&a.to_be_bytes()),
                Scalar::V6(a) => cut(&a.to_be_bytes()),
                // The compiler slices no other type.
                Scalar::U(_) | Scalar::Time(_) | Scalar::Cut(_) => {}
            }),
            Target::Proto(p) => {
                if let Some(b) = p.bytes(c) {
                    cut(b.own())
                }
            }
            // The compiler slices no function.
            Target::Call { .. } => {}
        }
    }

    /// Calls `f` with each value of a field or function (`target` is not a
    /// protocol).
    fn values(&self, target: Target, c: &Ctx<'_>, shown: Shown, mut f: impl FnMut(Scalar<'_>)) {
        match target {
            Target::Field(field) => self.each(field, c, shown, f),
            Target::Call { index, .. } => self.call(&self.calls[index], c, shown, &mut f),
            Target::Proto(_) => {}
        }
    }

    /// Calls `f` with each value of the function `call` (see [`func`]). `f` is a
    /// trait object, as is [`Filter::view`]'s: these rare tests compiled into
    /// `eval` for each caller's closure made every filter 10–15 % slower.
    fn call(&self, call: &Call, c: &Ctx<'_>, shown: Shown, f: &mut dyn FnMut(Scalar<'_>)) {
        match call.func {
            Func::Len => {
                for &arg in call.args.iter() {
                    match arg {
                        Target::Field(field) => self.each(field, c, shown, |s| {
                            let n = match s {
                                Scalar::Bytes(b) => b.len() as u64,
                                Scalar::Str(t) => t.len() as u64,
                                Scalar::Mac(_) => 6,
                                Scalar::V4(_) => 4,
                                Scalar::V6(_) => 16,
                                Scalar::U(_) | Scalar::Time(_) | Scalar::Cut(_) => {
                                    func::number_len(field)
                                }
                            };
                            f(Scalar::U(n))
                        }),
                        Target::Proto(p) => {
                            if let Some(b) = p.bytes(c) {
                                f(Scalar::U(b.own as u64))
                            }
                        }
                        Target::Call { .. } => {}
                    }
                }
            }
            Func::Count => {
                let mut n = 0u64;
                for &arg in call.args.iter() {
                    match arg {
                        Target::Field(field) => fields::visit(field, c, shown, |_| n += 1),
                        Target::Proto(p) => n += u64::from(p.bytes(c).is_some()),
                        Target::Call { .. } => {}
                    }
                }
                if n > 0 {
                    f(Scalar::U(n))
                }
            }
            Func::Upper | Func::Lower | Func::String => {
                for field in call.fields() {
                    self.each(field, c, shown, |s| {
                        let mut made = self.made.borrow_mut();
                        made.clear();
                        let _ = match s {
                            Scalar::Str(t) => write!(made, "{t}"),
                            Scalar::U(v) => write!(made, "{v}"),
                            Scalar::V4(a) => write!(made, "{}", Ipv4Addr::from(a)),
                            Scalar::V6(a) => write!(made, "{}", Ipv6Addr::from(a)),
                            Scalar::Mac(m) => {
                                write!(made, "{}", crate::wire::ethernet::Mac(mac_bytes(m)))
                            }
                            // The compiler takes no other type.
                            Scalar::Bytes(_) | Scalar::Cut(_) | Scalar::Time(_) => return,
                        };
                        match call.func {
                            Func::Upper => made.make_ascii_uppercase(),
                            Func::Lower => made.make_ascii_lowercase(),
                            _ => {}
                        }
                        f(Scalar::Str(&made))
                    });
                }
            }
            Func::Max | Func::Min => {
                let mut best: Option<Scalar<'static>> = None;
                for field in call.fields() {
                    self.each(field, c, shown, |s| {
                        let Some(s) = s.owned() else { return };
                        let keep = Some(if call.func == Func::Max {
                            Ordering::Greater
                        } else {
                            Ordering::Less
                        });
                        if best.is_none_or(|b| s.cmp_same(&b) == keep) {
                            best = Some(s);
                        }
                    });
                }
                if let Some(b) = best {
                    f(b)
                }
            }
            // Every number field of ours is unsigned.
            Func::Abs => {
                for field in call.fields() {
                    self.each(field, c, shown, &mut *f)
                }
            }
        }
    }

    /// `target [& mask] REL other`: every pair of their values (both are plain
    /// scalars: the compiler allows no text or bytes here).
    fn pair(
        &self,
        target: Target,
        mask: Option<u64>,
        rel: Rel,
        other: Target,
        c: &Ctx<'_>,
        shown: Shown,
    ) -> bool {
        let mut rhs: [Option<Scalar<'static>>; 4] = [None; 4];
        let mut n = 0;
        self.values(other, c, shown, |s| {
            let Some(owned) = s.owned() else { return };
            if let Some(slot) = rhs.get_mut(n) {
                *slot = Some(owned);
                n += 1;
            }
        });
        let mut seen = Seen::default();
        self.values(target, c, shown, |a| {
            let a = match (a, mask) {
                (Scalar::U(v), Some(m)) => Scalar::U(v & m),
                _ => a,
            };
            for b in rhs[..n].iter().flatten() {
                let o = a.cmp_same(b);
                let p = match rel {
                    Rel::AnyEq | Rel::AllEq => o == Some(Ordering::Equal),
                    Rel::AllNe | Rel::AnyNe => o.is_some_and(|o| o != Ordering::Equal),
                    Rel::Lt => o == Some(Ordering::Less),
                    Rel::Gt => o == Some(Ordering::Greater),
                    Rel::Le => o.is_some_and(|o| o != Ordering::Greater),
                    Rel::Ge => o.is_some_and(|o| o != Ordering::Less),
                    Rel::Contains | Rel::Matches | Rel::In => false,
                };
                seen.add(p);
            }
        });
        seen.holds(rel)
    }
}

/// What a test made of each value it compared.
#[derive(Debug, Clone, Copy)]
struct Seen {
    present: bool,
    any: bool,
    all: bool,
}

impl Default for Seen {
    fn default() -> Seen {
        Seen { present: false, any: false, all: true }
    }
}

impl Seen {
    fn add(&mut self, holds: bool) {
        self.present = true;
        self.any |= holds;
        self.all &= holds;
    }

    /// `===` and `!=` hold when every value does (and there is one); the others
    /// when any does.
    fn holds(self, rel: Rel) -> bool {
        match rel {
            Rel::AllNe | Rel::AllEq => self.present && self.all,
            _ => self.any,
        }
    }
}

/// One occurrence against the right-hand side. For `!=` (all not equal) this says
/// "not equal"; the caller requires it of every occurrence.
fn test(rel: Rel, rhs: &Rhs, s: &Scalar<'_>) -> bool {
    match rhs {
        Rhs::One(c) => match rel {
            Rel::AnyEq | Rel::AllEq => c.eq(s),
            // Values that do not compare (bytes cut short, of the constant's length)
            // are neither equal nor not.
            Rel::AllNe | Rel::AnyNe => c.cmp(s).is_some() && !c.eq(s),
            Rel::Lt => c.cmp(s) == Some(Ordering::Less),
            Rel::Gt => c.cmp(s) == Some(Ordering::Greater),
            Rel::Le => c.cmp(s).is_some_and(|o| o != Ordering::Greater),
            Rel::Ge => c.cmp(s).is_some_and(|o| o != Ordering::Less),
            Rel::Contains => c.contains(s),
            Rel::Matches => c.matches(s),
            Rel::In => false,
        },
        Rhs::Set(items) => items.iter().any(|i| match i {
            Item::One(c) => c.eq(s),
            Item::Range(lo, hi) => {
                lo.cmp(s).is_some_and(|o| o != Ordering::Less)
                    && hi.cmp(s).is_some_and(|o| o != Ordering::Greater)
            }
        }),
        Rhs::Values(_) => false,
    }
}

/// A regular expression as tshark 4.0 (PCRE2) reads it, for Rust's engine: `$` and
/// `\Z` also hold before a newline that ends the text (PCRE's default), so they
/// become `(?:\n?\z)`; a pattern that turns on multi-line mode (`(?m)`) keeps its
/// `$`, which then means the same in both.
fn pcre_anchors(p: &str) -> std::borrow::Cow<'_, str> {
    if !p.contains('$') && !p.contains("\\Z") {
        return p.into();
    }
    let multiline = p.match_indices("(?").any(|(i, _)| {
        let flags = &p[i + 2..];
        let end = flags.find([')', ':']).unwrap_or(flags.len());
        flags[..end].split('-').next().is_some_and(|on| on.contains('m'))
    });
    const END: &str = "(?:\\n?\\z)";
    let mut out = String::with_capacity(p.len() + 16);
    let mut chars = p.chars().peekable();
    // Inside `[…]`, and whether the class has had its first member yet (a `]`
    // first in a class is a member, not its end).
    let (mut class, mut first) = (false, false);
    while let Some(ch) = chars.next() {
        match ch {
            '\\' => match chars.next() {
                Some('Z') if !class => out.push_str(END),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            },
            '[' if !class => {
                class = true;
                first = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                continue;
            }
            ']' if class && !first => {
                class = false;
                out.push(']');
            }
            '$' if !class && !multiline => out.push_str(END),
            c => out.push(c),
        }
        first = false;
    }
    out.into()
}

/// The last line of a regex error: what is wrong, without the pattern repeated.
fn regex_error(e: &dyn fmt::Display) -> String {
    e.to_string().lines().last().unwrap_or("").trim().to_string()
}

struct Compiler<'a> {
    text: &'a str,
    /// The function calls compiled so far ([`Target::Call`]'s `index`).
    calls: RefCell<Vec<Call>>,
}

impl Compiler<'_> {
    fn err<T>(&self, span: Range<usize>, kind: ErrorKind) -> Result<T, FilterError> {
        Err(FilterError::new(self.text, span, kind))
    }

    fn expr(&self, e: &Expr) -> Result<Node, FilterError> {
        Ok(match e {
            Expr::Or(all) => Node::Or(all.iter().map(|e| self.expr(e)).collect::<Result<_, _>>()?),
            Expr::And(all) => {
                Node::And(all.iter().map(|e| self.expr(e)).collect::<Result<_, _>>()?)
            }
            Expr::Not(a) => Node::Not(Box::new(self.expr(a)?)),
            Expr::Test(t) => {
                let lhs = &t.lhs;
                if lhs.quoted {
                    return self.err(lhs.span.clone(), ErrorKind::QuotedName);
                }
                if let Some(call) = &t.call {
                    return self.called(t, call);
                }
                let name = lhs.text.as_str();
                let field = Field::lookup(name).ok();
                // Bytes read a slice at a time, or ANDed with a byte mask.
                let byte_mask = !t.masks.is_empty()
                    && field.is_some_and(|f| matches!(f.ty(), Ty::Bytes | Ty::Mac));
                if t.slice.is_some() || byte_mask {
                    return self.bytewise(t, field);
                }
                let proto = protocol(name);
                let mask = match (t.masks.is_empty(), field, proto) {
                    (true, _, _) | (false, None, None) => None,
                    (false, Some(f), _) => {
                        Some(self.mask(Target::Field(f), lhs.span.clone(), &t.masks)?)
                    }
                    (false, None, Some(_)) => {
                        let what =
                            if Header::lookup(name).is_some() { "header" } else { "protocol" };
                        return self.err(
                            lhs.span.clone(),
                            ErrorKind::MaskNotForType { name: name.to_string(), what },
                        );
                    }
                };
                match (&t.rel, field, proto) {
                    (None, Some(f), _) => match mask {
                        Some(mask) => Node::BitTest { field: f, mask },
                        None => Node::Present(f),
                    },
                    (None, None, Some(p)) => Node::Proto(p),
                    (Some((rel, rel_span, rhs)), Some(f), _) => {
                        self.cmp(Target::Field(f), mask, None, *rel, rel_span.clone(), rhs)?
                    }
                    (Some((rel, rel_span, rhs)), None, Some(_)) => match ProtoBytes::lookup(name) {
                        Some(p) => {
                            self.cmp(Target::Proto(p), None, None, *rel, rel_span.clone(), rhs)?
                        }
                        None => {
                            return self.err(
                                lhs.span.clone(),
                                ErrorKind::ProtocolCompared { name: name.to_string() },
                            )
                        }
                    },
                    (_, None, None) => return Err(self.unknown(lhs)),
                }
            }
        })
    }

    /// A test of a function's values: `len(data.data) > 1000`.
    fn called(&self, t: &parse::Test, call: &parse::Call) -> Result<Node, FilterError> {
        let target = self.function(call)?;
        if let Some((_, span)) = &t.slice {
            let kind = ErrorKind::SliceNotForType {
                name: call.name.text.clone(),
                what: "a function's value",
            };
            return self.err(span.clone(), kind);
        }
        let mask = match t.masks.is_empty() {
            true => None,
            false => Some(self.mask(target, call.span.clone(), &t.masks)?),
        };
        match (&t.rel, mask) {
            // `len(x) & 2`: some value ANDed with the mask is not zero.
            (None, Some(_)) => {
                let rhs = Rhs::One(Const::U(0));
                Ok(Node::Cmp { target, mask, rel: Rel::AnyNe, rhs })
            }
            // tshark 4.0: "You cannot test whether a function is present."
            (None, None) => self.err(call.span.clone(), ErrorKind::FunctionAlone),
            (Some((rel, rel_span, rhs)), _) => {
                self.cmp(target, mask, None, *rel, rel_span.clone(), rhs)
            }
        }
    }

    /// A function and its arguments, checked and kept in [`Compiler::calls`].
    fn function(&self, call: &parse::Call) -> Result<Target, FilterError> {
        let name = &call.name;
        let Some(func) = Func::lookup(&name.text) else {
            let suggestion = did_you_mean(&name.text, Func::names());
            let kind = ErrorKind::UnknownFunction { name: name.text.clone(), suggestion };
            return self.err(name.span.clone(), kind);
        };
        let mut args = Vec::with_capacity(call.args.len());
        let mut ty = None;
        for (i, a) in call.args.iter().enumerate() {
            let bad = |why: &'static str| {
                let kind = ErrorKind::BadArgument { func: func.name(), text: a.text.clone(), why };
                Err(FilterError::new(self.text, a.span.clone(), kind))
            };
            if i > 0 && !func.takes_many() {
                return bad("it takes one argument");
            }
            if a.quoted || a.text.starts_with(|c: char| c.is_ascii_digit()) {
                return bad("an argument is a field name, not a value");
            }
            let (target, field) = match (Field::lookup(&a.text).ok(), ProtoBytes::lookup(&a.text)) {
                (Some(f), _) => (Target::Field(f), Some(f)),
                (None, Some(p)) => (Target::Proto(p), None),
                (None, None) if protocol(&a.text).is_some() => {
                    return bad("of the protocols, only those read as bytes can be arguments")
                }
                (None, None) => return Err(self.unknown(a)),
            };
            let t = match func.ty(field) {
                Ok(t) => t,
                Err(why) => return bad(why),
            };
            if ty.is_some_and(|before| before != t) {
                return bad("the arguments must all be of one type");
            }
            ty = Some(t);
            args.push(target);
        }
        let mut calls = self.calls.borrow_mut();
        calls.push(Call { func, args: args.into_boxed_slice() });
        Ok(Target::Call { index: calls.len() - 1, func, ty: ty.unwrap_or(Ty::Uint) })
    }

    /// `name` is no field, protocol or header.
    fn unknown(&self, name: &Operand) -> FilterError {
        let names = Field::ALL
            .iter()
            .map(|(_, n, _)| *n)
            .chain(PROTOCOLS.iter().map(|(n, _)| *n))
            .chain(Header::ALL.iter().map(|(n, _, _)| *n));
        let suggestion = did_you_mean(&name.text, names);
        FilterError::new(
            self.text,
            name.span.clone(),
            ErrorKind::UnknownField { name: name.text.clone(), suggestion },
        )
    }

    /// A test of `NAME[…]`, `NAME[…] & MASK` or (a byte or MAC field) `NAME &
    /// MASK`; `field` is the field `NAME` names, if any. Present (not empty, or
    /// not all zero after a mask), or compared as a byte string.
    fn bytewise(&self, t: &parse::Test, field: Option<Field>) -> Result<Node, FilterError> {
        let lhs = &t.lhs;
        let name = lhs.text.as_str();
        let not_for = |what| ErrorKind::SliceNotForType { name: name.to_string(), what };
        let target = match (field, ProtoBytes::lookup(name)) {
            // tshark 4.0: "Range is not supported for entity _ws.col.Info".
            (Some(f), _) if f.name().starts_with("_ws.col.") => {
                return self.err(lhs.span.clone(), not_for("a column"))
            }
            (Some(f), _) => match f.ty() {
                Ty::Bytes | Ty::Mac | Ty::Ipv4 | Ty::Ipv6 | Ty::Str => Target::Field(f),
                ty => return self.err(lhs.span.clone(), not_for(ty.name())),
            },
            (None, Some(p)) => Target::Proto(p),
            (None, None) if Header::lookup(name).is_some() => {
                return self.err(lhs.span.clone(), not_for("a header, present or not"))
            }
            (None, None) if protocol(name).is_some() => {
                return self.err(lhs.span.clone(), not_for("a protocol, present or not"))
            }
            (None, None) => return Err(self.unknown(lhs)),
        };
        let slice = match &t.slice {
            // The text between the brackets starts one byte after `[`.
            Some((inner, span)) => Some(Slice::parse(inner, span.start + 1).map_err(|e| {
                let kind = ErrorKind::BadSlice { text: e.text, why: e.why };
                FilterError::new(self.text, e.span, kind)
            })?),
            None => None,
        };
        // A whole MAC takes a MAC as its mask (tshark: "`1` contains too few
        // bytes to be a valid Ethernet address"); a slice or byte field, bytes.
        let mask_ty = if slice.is_none() { target.ty() } else { Ty::Bytes };
        let mut mask: Option<Vec<u8>> = None;
        for m in &t.masks {
            if m.quoted {
                let bad =
                    ErrorKind::BadMask { text: m.text.clone(), why: "a mask is bytes, not text" };
                return self.err(m.span.clone(), bad);
            }
            let bytes = match self.value(target.name(), mask_ty, m)? {
                Const::Mac(v) => mac_bytes(v).to_vec(),
                Const::Bytes(b) => b,
                _ => {
                    let bad = ErrorKind::BadMask { text: m.text.clone(), why: "not bytes" };
                    return self.err(m.span.clone(), bad);
                }
            };
            mask = Some(match mask {
                Some(before) => before.iter().zip(&bytes).map(|(a, b)| a & b).collect(),
                None => bytes,
            });
        }
        let view = View { slice, mask: mask.map(Vec::into_boxed_slice) };
        match &t.rel {
            None => Ok(Node::Bytewise { target, view: Box::new(view), test: None }),
            Some((rel, rel_span, rhs)) => {
                self.cmp(target, None, Some(view), *rel, rel_span.clone(), rhs)
            }
        }
    }

    /// The masks after `f` (`f & 0x60 & 0x20`), ANDed together: numbers no larger
    /// than the field's type holds, on a number field.
    fn mask(&self, t: Target, lhs: Range<usize>, masks: &[Operand]) -> Result<u64, FilterError> {
        if t.ty() != Ty::Uint {
            let what = t.ty().name();
            return self.err(lhs, ErrorKind::MaskNotForType { name: t.name().to_string(), what });
        }
        let mut all = u64::MAX;
        for m in masks {
            let bad = |why| ErrorKind::BadMask { text: m.text.clone(), why };
            if m.quoted {
                return self.err(m.span.clone(), bad("a mask is a number, not text"));
            }
            let Some(v) = number(&m.text) else {
                let why = if Field::lookup(&m.text).is_ok() {
                    "a field as a mask (tshark takes it) is not supported; write the number"
                } else {
                    "not a number"
                };
                return self.err(m.span.clone(), bad(why));
            };
            if let Target::Field(f) = t {
                self.fits(f, v, m)?;
            }
            all &= v;
        }
        Ok(all)
    }

    /// `v`, written as `op`, fits field `f`'s type.
    fn fits(&self, f: Field, v: u64, op: &Operand) -> Result<(), FilterError> {
        if v > f.max() {
            let kind = ErrorKind::TooBig { text: op.text.clone(), field: f.name(), max: f.max() };
            return self.err(op.span.clone(), kind);
        }
        Ok(())
    }

    fn cmp(
        &self,
        target: Target,
        mask: Option<u64>,
        view: Option<View>,
        rel: Rel,
        rel_span: Range<usize>,
        rhs: &PRhs,
    ) -> Result<Node, FilterError> {
        // A slice or a masked MAC is bytes, whatever it was made from.
        let ty = if view.is_some() { Ty::Bytes } else { target.ty() };
        let not_for = |rel| ErrorKind::RelNotForType { rel, field: target.name(), ty };
        match rel {
            Rel::Contains if !matches!(ty, Ty::Str | Ty::Bytes | Ty::Mac) => {
                return self.err(rel_span, not_for(rel))
            }
            Rel::Matches if !matches!(ty, Ty::Str | Ty::Bytes | Ty::Mac) => {
                return self.err(rel_span, not_for(rel))
            }
            _ => {}
        }
        let ordered = matches!(rel, Rel::Lt | Rel::Gt | Rel::Le | Rel::Ge);
        // The numbers a masked field is compared with must fit its type, as the mask.
        let check = |c: &Const, v: &Operand| match (c, target, mask) {
            (Const::U(n), Target::Field(f), Some(_)) => self.fits(f, *n, v),
            _ => Ok(()),
        };
        let rhs = match rhs {
            PRhs::One(v) => {
                if rel == Rel::Matches {
                    let pattern = pcre_anchors(&v.text);
                    // tshark 4.0's `matches` ignores case; `contains` does not. On
                    // bytes it reads bytes, not UTF-8 (`\xff` is the byte 0xff).
                    let re = if ty == Ty::Str {
                        regex::RegexBuilder::new(&pattern)
                            .case_insensitive(true)
                            .build()
                            .map(Const::Re)
                            .map_err(|e| regex_error(&e))
                    } else {
                        regex::bytes::RegexBuilder::new(&pattern)
                            .case_insensitive(true)
                            .unicode(false)
                            .build()
                            .map(Const::ReBytes)
                            .map_err(|e| regex_error(&e))
                    };
                    match re {
                        Ok(re) => Rhs::One(re),
                        Err(error) => {
                            return self.err(v.span.clone(), ErrorKind::BadRegex { error })
                        }
                    }
                } else {
                    // A value that names a field compares the two fields (for text
                    // fields, an unquoted field name is taken as the field).
                    let other = Field::lookup(&v.text)
                        .ok()
                        .filter(|_| !v.quoted && rel != Rel::Contains)
                        .filter(|_| !matches!(target, Target::Proto(_)) && view.is_none());
                    // `contains` on a MAC looks for bytes (`eth.src contains 02:00`),
                    // not text.
                    let vty = if rel == Rel::Contains && ty == Ty::Mac { Ty::Bytes } else { ty };
                    if vty != ty && v.quoted {
                        let kind = ErrorKind::QuotedValue { field: target.name(), ty };
                        return self.err(v.span.clone(), kind);
                    }
                    if view.is_some() && !v.quoted && Field::lookup(&v.text).is_ok() {
                        return self.err(v.span.clone(), ErrorKind::SliceOnValue);
                    }
                    let value = match other {
                        Some(_) if ty == Ty::Str => Err(None),
                        _ => self.value(target.name(), vty, v).map_err(Some),
                    };
                    match value {
                        Ok(c) => {
                            if ordered && c.is_subnet() {
                                return self.err(v.span.clone(), ErrorKind::SubnetOrdered);
                            }
                            check(&c, v)?;
                            Rhs::One(c)
                        }
                        Err(e) => match other {
                            Some(g) => self.pair(target, Target::Field(g), v.span.clone())?,
                            None => {
                                return Err(e.unwrap_or_else(|| {
                                    FilterError::new(
                                        self.text,
                                        v.span.clone(),
                                        ErrorKind::QuotedName,
                                    )
                                }))
                            }
                        },
                    }
                }
            }
            PRhs::Call(call) => {
                let other = self.function(call)?;
                if matches!(rel, Rel::Contains | Rel::Matches) {
                    return self.err(rel_span, not_for(rel));
                }
                self.pair(target, other, call.span.clone())?
            }
            PRhs::Set(elems) => {
                let mut items = Vec::with_capacity(elems.len());
                for e in elems {
                    items.push(match e {
                        SetElem::One(v) => Item::One(self.value(target.name(), ty, v)?),
                        SetElem::Range(lo, hi) => {
                            let a = self.value(target.name(), ty, lo)?;
                            let b = self.value(target.name(), ty, hi)?;
                            if a.is_subnet() || b.is_subnet() {
                                return self
                                    .err(lo.span.start..hi.span.end, ErrorKind::SubnetOrdered);
                            }
                            Item::Range(a, b)
                        }
                    });
                }
                Rhs::Set(items)
            }
        };
        Ok(match view {
            Some(view) => Node::Bytewise { target, view: Box::new(view), test: Some((rel, rhs)) },
            None => Node::Cmp { target, mask, rel, rhs },
        })
    }

    /// `target REL other`, each a field or a function: of one type, and not
    /// text or bytes.
    fn pair(&self, target: Target, other: Target, span: Range<usize>) -> Result<Rhs, FilterError> {
        let ty = target.ty();
        if matches!(target, Target::Proto(_)) {
            return self.err(span, ErrorKind::SliceOnValue);
        }
        if other.ty() != ty {
            let kind = ErrorKind::FieldTypesDiffer {
                left: target.name(),
                left_ty: ty,
                right: other.name(),
                right_ty: other.ty(),
            };
            return self.err(span, kind);
        }
        if matches!(ty, Ty::Str | Ty::Bytes) {
            return self.err(span, ErrorKind::FieldPairNotSupported { ty });
        }
        Ok(Rhs::Values(other))
    }

    /// The constant `v` means for `field`, whose values are of type `ty`.
    fn value(&self, field: &'static str, ty: Ty, v: &Operand) -> Result<Const, FilterError> {
        let bad = |why: &'static str| {
            self.err(v.span.clone(), ErrorKind::BadValue { field, ty, text: v.text.clone(), why })
        };
        if v.quoted && !matches!(ty, Ty::Str | Ty::Bytes) {
            return self.err(v.span.clone(), ErrorKind::QuotedValue { field, ty });
        }
        let t = v.text.as_str();
        Ok(match ty {
            Ty::Uint => match number(t) {
                Some(n) => Const::U(n),
                None => return bad("not a number"),
            },
            Ty::Bool => match t.to_ascii_lowercase().as_str() {
                "true" => Const::U(1),
                "false" => Const::U(0),
                _ => match number(t) {
                    Some(n) => Const::U(n),
                    None => return bad("a flag is 1 or 0"),
                },
            },
            Ty::Ipv4 => {
                let (a, bits) = subnet(t, 32);
                let Ok(addr) = a.parse::<Ipv4Addr>() else { return bad("not an IPv4 address") };
                let Some(bits) = bits else { return bad("the prefix length must be 0 to 32") };
                let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
                Const::V4 { addr: addr.into(), mask }
            }
            Ty::Ipv6 => {
                let (a, bits) = subnet(t, 128);
                let Ok(addr) = a.parse::<Ipv6Addr>() else { return bad("not an IPv6 address") };
                let Some(bits) = bits else { return bad("the prefix length must be 0 to 128") };
                let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                Const::V6 { addr: addr.into(), mask }
            }
            Ty::Mac => match mac(t) {
                Some(m) => Const::Mac(m),
                None => return bad("not six hex bytes"),
            },
            Ty::Time => match seconds(t) {
                Some(ns) => Const::Time(ns),
                None => return bad("not a number of seconds"),
            },
            Ty::Bytes if v.quoted => Const::Bytes(t.as_bytes().to_vec()),
            Ty::Bytes => {
                // One byte as tshark also takes it: `1` (0x01), `0xff`.
                let one = match t.strip_prefix("0x") {
                    Some(h) if h.len() == 2 => u8::from_str_radix(h, 16).ok(),
                    None if t.len() == 1 => u8::from_str_radix(t, 16).ok(),
                    _ => None,
                };
                if let Some(b) = one {
                    return Ok(Const::Bytes(vec![b]));
                }
                let digits: String = t.chars().filter(|c| !matches!(c, ':' | '-' | '.')).collect();
                match hex_bytes(&digits) {
                    Ok(b) if !b.is_empty() => Const::Bytes(b),
                    _ => return bad("not hex bytes"),
                }
            }
            Ty::Str => Const::Str(t.to_string()),
        })
    }
}

fn protocol(name: &str) -> Option<Proto> {
    Some(match name {
        "frame" => Proto::Frame,
        "roce" => Proto::Roce,
        "roce.icrc" => Proto::RoceIcrc,
        "roce.dc" => Proto::RoceDc,
        "ethertype" => Proto::Never,
        _ => match Header::lookup(name) {
            Some(h) => Proto::Header(h),
            None => Proto::Named(PROTOCOLS.iter().find(|(n, _)| *n == name)?.0),
        },
    })
}

/// A number as tshark reads one: `0x` hex, a leading `0` octal, else decimal.
fn number(t: &str) -> Option<u64> {
    let octal = t.len() > 1 && t.starts_with('0') && t.as_bytes()[1].is_ascii_digit();
    if octal {
        return u64::from_str_radix(&t[1..], 8).ok();
    }
    parse_u64(t).filter(|_| !t.contains(char::is_whitespace))
}

/// `ADDR` or `ADDR/BITS`: the address text and the prefix length, all `max` bits
/// when none is given; `None` for a prefix that is not a number from 0 to `max`.
fn subnet(t: &str, max: u32) -> (&str, Option<u32>) {
    match t.split_once('/') {
        Some((a, p)) => (a, p.parse::<u32>().ok().filter(|&b| b <= max)),
        None => (t, Some(max)),
    }
}

/// `02:00:00:00:00:01`, `02-00-00-00-00-01`, `0200.0000.0001`, `020000000001`.
fn mac(t: &str) -> Option<u64> {
    let hex = |s: &str, max: usize| {
        (!s.is_empty() && s.len() <= max).then(|| u64::from_str_radix(s, 16).ok()).flatten()
    };
    let (parts, width): (Vec<&str>, u32) = if t.contains(':') {
        (t.split(':').collect(), 8)
    } else if t.contains('-') {
        (t.split('-').collect(), 8)
    } else if t.contains('.') {
        (t.split('.').collect(), 16)
    } else {
        return (t.len() == 12).then(|| u64::from_str_radix(t, 16).ok()).flatten();
    };
    if parts.len() * width as usize != 48 {
        return None;
    }
    parts.iter().try_fold(0u64, |acc, p| Some(acc << width | hex(p, width as usize / 4)?))
}

/// Seconds with up to nine decimals, as nanoseconds: `0.000250` → 250 000, `-1` →
/// -10⁹ (a capture whose clock goes back has negative deltas).
fn seconds(t: &str) -> Option<i64> {
    if let Some(rest) = t.strip_prefix('-') {
        return seconds(rest).filter(|_| !rest.starts_with('-')).map(|ns| -ns);
    }
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    if (whole.is_empty() && frac.is_empty())
        || !whole.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let w: i64 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let mut ns = 0i64;
    for (i, d) in frac.bytes().take(9).enumerate() {
        ns += i64::from(d - b'0') * 10i64.pow(8 - i as u32);
    }
    w.checked_mul(1_000_000_000)?.checked_add(ns)
}

#[cfg(test)]
mod tests;
