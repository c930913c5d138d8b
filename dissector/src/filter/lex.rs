//! Display filter text → tokens, each with the byte span it came from.
//!
//! Owns: the tokens and their spans. Imports: the filter error (its parent).

use core::ops::Range;

use super::{ErrorKind, FilterError};

/// Byte range of a token in the filter text.
pub(super) type Span = Range<usize>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    LParen,
    RParen,
    LBrace,
    RBrace,
    Comma,
    /// `..` at the start of a token (`1 .. 3`); `1..3` is one word.
    DotDot,
    And,
    Or,
    Not,
    /// A comparison: `==`, `eq`, `!=`, `contains`, `in`, ….
    Rel(Rel),
    /// `&` or `bitwise_and`: a field's value ANDed with a mask.
    BitAnd,
    /// A field or protocol name, or a value written without quotes: anything made
    /// of letters, digits and `_ . : / - +`.
    Word(String),
    /// A value in double quotes, escapes resolved.
    Str(String),
    /// `[…]` after a name: what is between the brackets, as written (a slice).
    Slice(String),
}

/// The relations a test can use. tshark 4.0's meanings for fields that occur more
/// than once (`ip.addr`): `==` any equal, `!=` all not equal, `~=` / `!==` any not
/// equal, `===` all equal; the others hold if any occurrence satisfies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rel {
    AnyEq,
    AllNe,
    AnyNe,
    AllEq,
    Lt,
    Gt,
    Le,
    Ge,
    Contains,
    Matches,
    In,
}

impl Rel {
    /// How the filter text spells it (the symbol, where there is one).
    pub const fn symbol(self) -> &'static str {
        match self {
            Rel::AnyEq => "==",
            Rel::AllNe => "!=",
            Rel::AnyNe => "~=",
            Rel::AllEq => "===",
            Rel::Lt => "<",
            Rel::Gt => ">",
            Rel::Le => "<=",
            Rel::Ge => ">=",
            Rel::Contains => "contains",
            Rel::Matches => "matches",
            Rel::In => "in",
        }
    }
}

impl Tok {
    /// What the token is, for "expected …, found …" messages.
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBrace => "`{`".into(),
            Tok::RBrace => "`}`".into(),
            Tok::Comma => "`,`".into(),
            Tok::DotDot => "`..`".into(),
            Tok::And => "`and`".into(),
            Tok::Or => "`or`".into(),
            Tok::Not => "`not`".into(),
            Tok::BitAnd => "`&`".into(),
            Tok::Rel(r) => format!("`{}`", r.symbol()),
            Tok::Word(w) => format!("`{w}`"),
            Tok::Str(s) => format!("the string {s:?}"),
            Tok::Slice(s) => format!("`[{s}]`"),
        }
    }
}

fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '-' | '+')
}

fn keyword(w: &str) -> Option<Tok> {
    Some(match w {
        "and" => Tok::And,
        "or" => Tok::Or,
        "not" => Tok::Not,
        "eq" | "any_eq" => Tok::Rel(Rel::AnyEq),
        "ne" | "all_ne" => Tok::Rel(Rel::AllNe),
        "any_ne" => Tok::Rel(Rel::AnyNe),
        "all_eq" => Tok::Rel(Rel::AllEq),
        "lt" => Tok::Rel(Rel::Lt),
        "gt" => Tok::Rel(Rel::Gt),
        "le" => Tok::Rel(Rel::Le),
        "ge" => Tok::Rel(Rel::Ge),
        "contains" => Tok::Rel(Rel::Contains),
        "matches" | "~" => Tok::Rel(Rel::Matches),
        "in" => Tok::Rel(Rel::In),
        "bitwise_and" => Tok::BitAnd,
        _ => return None,
    })
}

/// Splits `text` into tokens.
pub(super) fn lex(text: &str) -> Result<Vec<(Tok, Span)>, FilterError> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    let err = |kind: ErrorKind, span: Span| Err(FilterError::new(text, span, kind));
    while i < b.len() {
        let Some(c) = text[i..].chars().next() else { break };
        let start = i;
        let two = text.get(i..i + 2).unwrap_or("");
        let three = text.get(i..i + 3).unwrap_or("");
        let (tok, len) = match c {
            c if c.is_whitespace() => {
                i += c.len_utf8();
                continue;
            }
            '(' => (Tok::LParen, 1),
            ')' => (Tok::RParen, 1),
            '{' => (Tok::LBrace, 1),
            '}' => (Tok::RBrace, 1),
            ',' => (Tok::Comma, 1),
            _ if three == "===" => (Tok::Rel(Rel::AllEq), 3),
            _ if three == "!==" => (Tok::Rel(Rel::AnyNe), 3),
            _ if two == "==" => (Tok::Rel(Rel::AnyEq), 2),
            _ if two == "!=" => (Tok::Rel(Rel::AllNe), 2),
            _ if two == "~=" => (Tok::Rel(Rel::AnyNe), 2),
            _ if two == "<=" => (Tok::Rel(Rel::Le), 2),
            _ if two == ">=" => (Tok::Rel(Rel::Ge), 2),
            _ if two == "&&" => (Tok::And, 2),
            _ if two == "||" => (Tok::Or, 2),
            // At the start of a token: `1..3` is one word, split by the parser.
            _ if two == ".." => (Tok::DotDot, 2),
            '<' => (Tok::Rel(Rel::Lt), 1),
            '>' => (Tok::Rel(Rel::Gt), 1),
            '!' => (Tok::Not, 1),
            '~' => (Tok::Rel(Rel::Matches), 1),
            // After `&&`: a single `&` is tshark's bitwise and.
            '&' => (Tok::BitAnd, 1),
            '"' => {
                let (s, len) = string(text, i)?;
                (Tok::Str(s), len)
            }
            '[' => match text[i..].find(']') {
                Some(end) => (Tok::Slice(text[i + 1..i + end].to_string()), end + 1),
                None => return err(ErrorKind::UnclosedBracket, i..i + 1),
            },
            c if word_char(c) => {
                let len = text[i..].find(|c: char| !word_char(c)).unwrap_or(text.len() - i);
                let w = &text[i..i + len];
                (keyword(w).unwrap_or_else(|| Tok::Word(w.to_string())), len)
            }
            '=' => return err(ErrorKind::SingleEquals, i..i + 1),
            '|' => return err(ErrorKind::SingleAmpersandOrBar { c }, i..i + 1),
            c => return err(ErrorKind::BadCharacter { c }, i..i + c.len_utf8()),
        };
        i += len;
        out.push((tok, start..i));
    }
    Ok(out)
}

/// A double-quoted string starting at `at`: its text and its length in the filter.
fn string(text: &str, at: usize) -> Result<(String, usize), FilterError> {
    let mut s = String::new();
    let mut chars = text[at + 1..].char_indices();
    while let Some((k, c)) = chars.next() {
        match c {
            '"' => return Ok((s, k + 2)),
            '\\' => match chars.next() {
                Some((_, 'n')) => s.push('\n'),
                Some((_, 't')) => s.push('\t'),
                Some((_, 'r')) => s.push('\r'),
                Some((_, '0')) => s.push('\0'),
                Some((_, c)) => s.push(c),
                None => break,
            },
            c => s.push(c),
        }
    }
    Err(FilterError::new(text, at..text.len(), ErrorKind::UnterminatedString))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn words_operators_and_spans() {
        let t = lex("ip.addr==10.0.0.0/24&&!udp").unwrap();
        let kinds: Vec<_> = t.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            kinds,
            [
                Tok::Word("ip.addr".into()),
                Tok::Rel(Rel::AnyEq),
                Tok::Word("10.0.0.0/24".into()),
                Tok::And,
                Tok::Not,
                Tok::Word("udp".into())
            ]
        );
        assert_eq!(t[2].1, 9..20);
        assert_eq!(
            toks("a !== b ~= c === d != e"),
            [
                Tok::Word("a".into()),
                Tok::Rel(Rel::AnyNe),
                Tok::Word("b".into()),
                Tok::Rel(Rel::AnyNe),
                Tok::Word("c".into()),
                Tok::Rel(Rel::AllEq),
                Tok::Word("d".into()),
                Tok::Rel(Rel::AllNe),
                Tok::Word("e".into()),
            ]
        );
        assert_eq!(toks("x in {1 .. 3}")[4], Tok::DotDot);
        assert_eq!(
            toks("x in {1..3}")[3],
            Tok::Word("1..3".into()),
            "a range without spaces is one word"
        );
        assert_eq!(toks("eth.src == aa:bb:cc:dd:ee:ff")[2], Tok::Word("aa:bb:cc:dd:ee:ff".into()));
    }

    #[test]
    fn strings_and_their_escapes() {
        assert_eq!(toks(r#"x contains "a\"b\\c\n""#)[2], Tok::Str("a\"b\\c\n".into()));
        let e = lex(r#"x contains "abc"#).unwrap_err();
        assert_eq!(e.kind, ErrorKind::UnterminatedString);
        assert_eq!(e.span, 11..15);
    }

    #[test]
    fn bad_characters_say_where() {
        let e = lex("ip.ttl = 5").unwrap_err();
        assert_eq!((e.kind.clone(), e.span.clone()), (ErrorKind::SingleEquals, 7..8));
        assert!(matches!(
            lex("a | b").unwrap_err().kind,
            ErrorKind::SingleAmpersandOrBar { c: '|' }
        ));
        assert_eq!(
            toks("a & 0x60 bitwise_and 1 && b"),
            [
                Tok::Word("a".into()),
                Tok::BitAnd,
                Tok::Word("0x60".into()),
                Tok::BitAnd,
                Tok::Word("1".into()),
                Tok::And,
                Tok::Word("b".into()),
            ]
        );
        assert_eq!(toks("a bitand 1")[1], Tok::Word("bitand".into()), "not tshark 4.0's");
        let e = lex("frame.len > 5 ; x").unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadCharacter { c: ';' });
        let e = lex("é").unwrap_err();
        assert_eq!(e.span, 0..2, "a multi-byte character is one span");
    }
}
