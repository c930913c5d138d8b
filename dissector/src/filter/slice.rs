//! Slices: which bytes of a value a test reads (`eth.src[0:3] == 52:54:00`,
//! `frame[-4:]`, `eth.src[0:1,4-5]`), cut as tshark 4.0 cuts them.
//!
//! A slice is one or more parts apart by commas, each `start:length`,
//! `start-end` (the end byte included), `start` (one byte), `start:` (to the end)
//! or `:length` (from the start); a negative offset counts from the end of the
//! value. The bytes of the parts are joined. A part that runs past the value ends
//! the slice there: the parts before it are what the test reads (`eth.src[7:1]`
//! is empty, `eth.src[0:1,7:1]` is its first byte), as in tshark.
//!
//! Owns: the parts and the cutting. Imports: the number syntax (its parent).

use core::ops::Range;

/// Where a part ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// This many bytes from the start (at least one).
    Len(u64),
    /// This byte, included (negative: from the end).
    Last(i64),
    /// The end of the value (the rest of it).
    Rest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Part {
    /// Negative: from the end.
    start: i64,
    end: End,
}

impl Part {
    /// The bytes of a value `len` bytes long the part reads; `None` if it runs
    /// past either end.
    fn within(self, len: usize) -> Option<Range<usize>> {
        let len = i64::try_from(len).ok()?;
        let start = if self.start < 0 { self.start + len } else { self.start };
        if !(0..=len).contains(&start) {
            return None;
        }
        let end = match self.end {
            End::Len(n) => start.checked_add(i64::try_from(n).ok()?).filter(|&e| e <= len)?,
            End::Rest => len,
            End::Last(e) => {
                let e = if e < 0 { e + len } else { e };
                if e < start || e >= len {
                    return None;
                }
                e + 1
            }
        };
        Some(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
    }
}

/// A compiled slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Slice(Box<[Part]>);

/// A part that is not a slice: where (in the text given to [`Slice::parse`]) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BadPart {
    pub span: Range<usize>,
    pub text: String,
    pub why: String,
}

impl Slice {
    /// Reads what is between the brackets; `at` is where that text starts in the
    /// filter (for the spans of errors).
    pub(super) fn parse(inner: &str, at: usize) -> Result<Slice, BadPart> {
        let mut parts = Vec::new();
        let mut from = 0;
        for raw in inner.split(',') {
            let lead = raw.len() - raw.trim_start().len();
            let text = raw.trim();
            let start = at + from + lead;
            let bad = |why: String| BadPart {
                span: start..start + text.len().max(1),
                text: text.to_string(),
                why,
            };
            parts.push(part(text).map_err(bad)?);
            from += raw.len() + 1;
        }
        Ok(Slice(parts.into_boxed_slice()))
    }

    /// The bytes of `v` the slice reads: a part of `v` when it has one part, else
    /// the parts joined in `buf`.
    pub(super) fn apply<'a>(&self, v: &'a [u8], buf: &'a mut Vec<u8>) -> &'a [u8] {
        if let [one] = &self.0[..] {
            return one.within(v.len()).map_or(&[], |r| &v[r]);
        }
        buf.clear();
        for p in self.0.iter() {
            match p.within(v.len()) {
                Some(r) => buf.extend_from_slice(&v[r]),
                None => break,
            }
        }
        buf
    }
}

/// One part, as written between commas.
fn part(text: &str) -> Result<Part, String> {
    if text.is_empty() {
        return Err("a slice part is empty".into());
    }
    if let Some((a, b)) = text.split_once(':') {
        let start = if a.trim().is_empty() { 0 } else { offset(a.trim())? };
        let end = match b.trim() {
            "" => End::Rest,
            n => match offset(n)? {
                0 => return Err("a length must be at least 1".into()),
                n if n < 0 => return Err(format!("a length cannot be negative ({n})")),
                n => End::Len(n.unsigned_abs()),
            },
        };
        return Ok(Part { start, end });
    }
    // `start-end`: the `-` that is not a sign.
    let body = text.strip_prefix('-').unwrap_or(text);
    if let Some(k) = body.find('-') {
        let split = text.len() - body.len() + k;
        let (a, b) = (offset(text[..split].trim())?, offset(text[split + 1..].trim())?);
        if (a < 0) != (b < 0) {
            return Err(format!(
                "{a} and {b} count from different ends (both from the start, or both from the end)"
            ));
        }
        if a >= b {
            return Err(format!("the end ({b}) must come after the start ({a})"));
        }
        return Ok(Part { start: a, end: End::Last(b) });
    }
    Ok(Part { start: offset(text)?, end: End::Len(1) })
}

/// An offset: a number as the rest of the filter writes one, maybe negative.
fn offset(t: &str) -> Result<i64, String> {
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t),
    };
    let n = super::number(digits)
        .and_then(|n| i64::try_from(n).ok())
        .ok_or_else(|| format!("`{t}` is not a number"))?;
    Ok(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: [u8; 0] = [];

    fn cut(slice: &str, v: &[u8]) -> Vec<u8> {
        let s = Slice::parse(slice, 0).unwrap_or_else(|e| panic!("{slice}: {e:?}"));
        let mut buf = Vec::new();
        s.apply(v, &mut buf).to_vec()
    }

    /// Each form on a MAC's six bytes, with what tshark 4.0 keeps for it on the
    /// project's captures (`eth.src` 52:54:00:00:00:0b).
    #[test]
    fn every_form_cuts_as_tshark_does() {
        let mac = [0x52, 0x54, 0, 0, 0, 0x0b];
        assert_eq!(cut("0:3", &mac), [0x52, 0x54, 0]);
        assert_eq!(cut(":3", &mac), [0x52, 0x54, 0]);
        assert_eq!(cut("4:", &mac), [0, 0x0b]);
        assert_eq!(cut("1-2", &mac), [0x54, 0]);
        assert_eq!(cut("-2:", &mac), [0, 0x0b]);
        assert_eq!(cut("-1", &mac), [0x0b]);
        assert_eq!(cut("-3--2", &mac), [0, 0]);
        assert_eq!(cut("0x1:2", &mac), [0x54, 0]);
        assert_eq!(cut(":", &mac), mac);
        assert_eq!(cut(" 0 : 3 ", &mac), [0x52, 0x54, 0]);
        assert_eq!(cut("0:1,4-5", &mac), [0x52, 0, 0x0b]);
        // Past the end: empty, or what the parts before gave.
        assert_eq!(cut("6:", &mac), NONE);
        assert_eq!(cut("4:4", &mac), NONE);
        assert_eq!(cut("7:1", &mac), NONE);
        assert_eq!(cut("1-6", &mac), NONE);
        assert_eq!(cut("-7:1", &mac), NONE);
        assert_eq!(cut("0:1,10:2", &mac), [0x52]);
        assert_eq!(cut("10:2,0:1", &mac), NONE);
    }

    #[test]
    fn what_is_not_a_slice_says_which_part_and_why() {
        let e = Slice::parse("0:1, 2-1", 8).unwrap_err();
        assert_eq!((e.span, e.text.as_str()), (13..16, "2-1"));
        assert!(e.why.contains("must come after"), "{}", e.why);
        assert!(Slice::parse("1-1", 0).unwrap_err().why.contains("must come after"));
        assert!(Slice::parse("0:0", 0).unwrap_err().why.contains("at least 1"));
        assert!(Slice::parse("-2-5", 0).unwrap_err().why.contains("different ends"));
        assert!(Slice::parse("a:2", 0).unwrap_err().why.contains("`a` is not a number"));
        assert_eq!(Slice::parse("", 3).unwrap_err().span, 3..4);
        assert!(Slice::parse("0:1,", 0).is_err());
        assert!(Slice::parse("99999999999999999999", 0).is_err());
    }
}
