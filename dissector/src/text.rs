//! Text a user typed: numbers in decimal or hex, hex bytes, and the known name
//! closest to a typo; and the one timestamp format the reports and logs print.
//!
//! Every layer reads such text — scenario files, fault rules, command-line options,
//! field names — so each rule lives here once, at the bottom of the stack. Nothing
//! here knows what the text is for; callers say that in their errors.
//!
//! Owns: reading numbers and bytes as typed, did-you-mean, the timestamp format.
//! Imports: nothing of the project.

use core::fmt;

/// A number in decimal or `0x` hex, `_` allowed as a digit separator (QPNs, PSNs,
/// keys and addresses are usually written in hex). `None` when it is neither.
pub fn parse_u64(s: &str) -> Option<u64> {
    let t = s.trim().replace('_', "");
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) if !h.is_empty() => u64::from_str_radix(h, 16).ok(),
        Some(_) => None,
        None => t.parse().ok(),
    }
}

/// Why hex text is not bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HexError {
    /// The digits (whitespace removed) do not pair up.
    OddDigits { text: String },
    /// Two characters that are not a hex byte.
    NotHex { pair: String },
}

impl fmt::Display for HexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HexError::OddDigits { text } => write!(f, "`{text}` has an odd number of hex digits"),
            HexError::NotHex { pair } => write!(f, "`{pair}` is not a hex byte"),
        }
    }
}

impl std::error::Error for HexError {}

/// Hex bytes, whitespace allowed anywhere and one leading `0x`: `"de ad be ef"`,
/// `"0xdeadbeef"`.
pub fn hex_bytes(s: &str) -> Result<Vec<u8>, HexError> {
    let text: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let digits: Vec<char> = text.strip_prefix("0x").unwrap_or(&text).chars().collect();
    if !digits.len().is_multiple_of(2) {
        return Err(HexError::OddDigits { text: s.to_string() });
    }
    digits
        .chunks(2)
        .map(|p| match (p[0].to_digit(16), p[1].to_digit(16)) {
            (Some(h), Some(l)) => Ok((h * 16 + l) as u8),
            _ => Err(HexError::NotHex { pair: p.iter().collect() }),
        })
        .collect()
}

/// `2026-11-23T20:31:07Z`: seconds since the epoch as an ISO 8601 UTC time
/// (proleptic Gregorian; Howard Hinnant's days-to-civil algorithm).
pub fn utc(unix_secs: u64) -> String {
    let (days, rem) = (unix_secs / 86_400, unix_secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Lower-case hex, two digits a byte, no separators: what [`hex_bytes`] reads back.
pub fn hex_string(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push(DIGITS[(x >> 4) as usize] as char);
        s.push(DIGITS[(x & 15) as usize] as char);
    }
    s
}

/// The candidate closest to `word`, if it is close enough to be a typo of it (at
/// most a third of the candidate's length away, and always 2).
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.chars().count() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// A name that is not one of the kind asked for, and the closest one that is: the
/// one shape every "unknown …" error takes, so the suggestion travels as data and
/// the words around it are written in one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// What kind of name was asked for: `opcode`, `access flag`, `NAK`, …
    pub what: &'static str,
    /// The name as it was written.
    pub name: String,
    /// The closest known name, if it is close enough to be a typo of it.
    pub suggestion: Option<String>,
}

impl UnknownName {
    /// `name` (compared as `normalized`) is none of `known`.
    pub fn among<'a>(
        what: &'static str,
        name: &str,
        normalized: &str,
        known: impl IntoIterator<Item = &'a str>,
    ) -> UnknownName {
        let suggestion = did_you_mean(normalized, known).map(str::to_string);
        UnknownName { what, name: name.to_string(), suggestion }
    }

    /// The hint a diagnostic shows beneath the error: "did you mean `x`?".
    pub fn hint(&self) -> Option<String> {
        self.suggestion.as_ref().map(|s| format!("did you mean `{s}`?"))
    }
}

/// `unknown access flag `remote_wrte` (did you mean `remote_write`?)`.
impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} `{}`", self.what, self.name)?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean `{s}`?)")?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownName {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn numbers_in_decimal_and_hex() {
        assert_eq!(parse_u64("17"), Some(17));
        assert_eq!(parse_u64(" 0x11 "), Some(17));
        assert_eq!(parse_u64("0X7f_00_00"), Some(0x7f0000));
        assert_eq!(parse_u64("1_000"), Some(1000));
        for bad in ["", "0x", "x11", "0xzz", "-1", "1.5", "18446744073709551616"] {
            assert_eq!(parse_u64(bad), None, "{bad}");
        }
    }

    #[test]
    fn hex_bytes_and_their_errors() {
        assert_eq!(hex_bytes("de ad\tbe ef").unwrap(), [0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(hex_bytes("0x0001").unwrap(), [0, 1]);
        assert_eq!(hex_bytes("").unwrap(), Vec::<u8>::new());
        assert_eq!(
            hex_bytes("abc").unwrap_err().to_string(),
            "`abc` has an odd number of hex digits"
        );
        assert_eq!(hex_bytes("zz").unwrap_err().to_string(), "`zz` is not a hex byte");
        assert_eq!(
            hex_bytes("éé").unwrap_err(),
            HexError::NotHex { pair: "éé".into() },
            "two characters, not hex"
        );
        assert_eq!(hex_bytes("aé").unwrap_err(), HexError::NotHex { pair: "aé".into() });
    }

    #[test]
    fn suggestions() {
        assert_eq!(did_you_mean("acess", ["access", "name"]), Some("access"));
        assert_eq!(did_you_mean("zzzzzz", ["access", "name"]), None);
        assert_eq!(
            did_you_mean("infiniband.bth.dstqp", ["infiniband.bth.destqp", "infiniband.bth.psn"]),
            Some("infiniband.bth.destqp")
        );
    }

    proptest! {
        #[test]
        fn hex_round_trip(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(hex_bytes(&hex_string(&b)).unwrap(), b);
        }

        #[test]
        fn any_text_is_an_answer_not_a_panic(s in "\\PC{0,12}") {
            let _ = parse_u64(&s);
            let _ = hex_bytes(&s);
        }
    }

    #[test]
    fn utc_times() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_465_867), "2026-11-23T20:31:07Z");
    }
}
