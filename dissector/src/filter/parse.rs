//! Tokens → syntax tree. Every node keeps the span of the text it came from, so the
//! compiler can put a caret under a bad field name or value.
//!
//! Precedence, loosest first (tshark 4.0's): `or`, `and`, `not`, a test. A test is a
//! field or protocol name alone (present), or `NAME REL VALUE`, or `NAME in {…}`; a
//! field may be ANDed with masks first (`NAME & MASK`, alone or before a comparison:
//! `NAME & MASK == VALUE`; tshark 4.0 takes no `in`, `contains` or `matches` there).
//!
//! Owns: the syntax tree. Imports: the tokens (its sibling) and the filter error (its
//! parent).

use super::lex::{Rel, Span, Tok};
use super::{ErrorKind, FilterError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Expr {
    /// Two or more, in order: a chain is a list, not a tree as deep as it is
    /// long (a filter of thousands of `or`s must not exhaust the stack).
    Or(Vec<Expr>),
    And(Vec<Expr>),
    Not(Box<Expr>),
    /// Boxed: a test is large, and the parser recurses through `(` with an
    /// `Expr` in every frame (200 levels must fit a test thread's stack).
    Test(Box<Test>),
}

/// A word or quoted string as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Operand {
    pub text: String,
    pub quoted: bool,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SetElem {
    One(Operand),
    Range(Operand, Operand),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Rhs {
    One(Operand),
    Set(Vec<SetElem>),
    /// A function of fields: `data.len == len(data.data)`.
    Call(Call),
}

/// `NAME(ARG, …)`: a display filter function (`len(data.data)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Call {
    pub name: Operand,
    pub args: Vec<Operand>,
    /// From the name to the closing `)`.
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Test {
    pub lhs: Operand,
    /// `lhs(…)`: the test is of a function's values, `lhs` its name.
    pub call: Option<Call>,
    /// `[…]` after the name: the slice as written, and its span.
    pub slice: Option<(String, Span)>,
    /// `& MASK` after the name, each mask as written (`a & 0x60 & 0x20`).
    pub masks: Vec<Operand>,
    /// The relation, its span, and what it compares with; `None`: "present" (with a
    /// mask: "the AND is not zero").
    pub rel: Option<(Rel, Span, Rhs)>,
}

struct Parser<'a> {
    text: &'a str,
    toks: Vec<(Tok, Span)>,
    at: usize,
    /// `(` and `not` open, around the token at `at`.
    depth: usize,
}

/// How deep `(` and `not` may nest. tshark 4.0 takes fewer (its parser stops
/// before 300 parentheses); the parser, compiler and evaluator recurse once a
/// level, so a hostile filter must not go deeper than a thread's stack holds.
pub(super) const MAX_DEPTH: usize = 256;

/// Parses `toks` (from `text`) into one expression.
pub(super) fn parse(text: &str, toks: Vec<(Tok, Span)>) -> Result<Expr, FilterError> {
    let mut p = Parser { text, toks, at: 0, depth: 0 };
    let e = p.or()?;
    match p.peek() {
        None => Ok(e),
        Some((Tok::RParen, s)) => Err(p.error(s, ErrorKind::UnbalancedParen)),
        Some((t, s)) => {
            let found = t.describe();
            let expected = match t {
                // Not tshark 4.0's word for it.
                Tok::Word(w) if w == "bitand" => {
                    "`&` or `bitwise_and` (tshark 4.0 has no `bitand`), `and`, `or` or the end of the filter"
                }
                _ => "`and`, `or` or the end of the filter",
            };
            Err(p.error(s, ErrorKind::Unexpected { found, expected }))
        }
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<(Tok, Span)> {
        self.toks.get(self.at).cloned()
    }

    fn bump(&mut self) -> Option<(Tok, Span)> {
        let t = self.peek();
        self.at += 1;
        t
    }

    fn error(&self, span: Span, kind: ErrorKind) -> FilterError {
        FilterError::new(self.text, span, kind)
    }

    /// The span just past the last token: where "the filter ends too soon" points.
    fn end(&self) -> Span {
        let n = self.text.trim_end().len();
        n..n
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let mut all = vec![self.and()?];
        while let Some((Tok::Or, _)) = self.peek() {
            self.bump();
            all.push(self.and()?);
        }
        Ok(match all.len() {
            1 => all.remove(0),
            _ => Expr::Or(all),
        })
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let mut all = vec![self.unary()?];
        while let Some((Tok::And, _)) = self.peek() {
            self.bump();
            all.push(self.unary()?);
        }
        Ok(match all.len() {
            1 => all.remove(0),
            _ => Expr::And(all),
        })
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        if let Some((Tok::Not | Tok::LParen, s)) = self.peek() {
            if self.depth >= MAX_DEPTH {
                return Err(self.error(s, ErrorKind::TooDeep { max: MAX_DEPTH }));
            }
            self.depth += 1;
            let e = self.nested();
            self.depth -= 1;
            return e;
        }
        self.test()
    }

    /// `not …` or `( … )`: one level deeper.
    fn nested(&mut self) -> Result<Expr, FilterError> {
        match self.peek() {
            Some((Tok::Not, _)) => {
                self.bump();
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some((Tok::LParen, open)) => {
                self.bump();
                let e = self.or()?;
                match self.bump() {
                    Some((Tok::RParen, _)) => Ok(e),
                    Some((t, s)) => {
                        let found = t.describe();
                        Err(self.error(s, ErrorKind::Unexpected { found, expected: "`)`" }))
                    }
                    None => Err(self.error(open, ErrorKind::UnclosedParen)),
                }
            }
            _ => self.test(),
        }
    }

    fn operand(&mut self, expected: &'static str) -> Result<Operand, FilterError> {
        match self.bump() {
            Some((Tok::Word(text), span)) => Ok(Operand { text, quoted: false, span }),
            Some((Tok::Str(text), span)) => Ok(Operand { text, quoted: true, span }),
            Some((t, s)) => {
                let found = t.describe();
                Err(self.error(s, ErrorKind::Unexpected { found, expected }))
            }
            None => Err(self.error(self.end(), ErrorKind::EndTooSoon { expected })),
        }
    }

    /// `NAME(` seen, `name` taken: the arguments, apart by commas, and `)`.
    fn call(&mut self, name: Operand) -> Result<Call, FilterError> {
        self.bump();
        let mut args = Vec::new();
        loop {
            args.push(self.operand("a field name (a function's argument)")?);
            match self.bump() {
                Some((Tok::Comma, _)) => continue,
                Some((Tok::RParen, close)) => {
                    let span = name.span.start..close.end;
                    return Ok(Call { name, args, span });
                }
                Some((t, s)) => {
                    let found = t.describe();
                    let expected = "`,` or `)` after a function's argument";
                    return Err(self.error(s, ErrorKind::Unexpected { found, expected }));
                }
                None => {
                    let expected = "`)` closing the function's arguments";
                    return Err(self.error(self.end(), ErrorKind::EndTooSoon { expected }));
                }
            }
        }
    }

    /// A function call if `(` follows the unquoted word `name`.
    fn maybe_call(&mut self, name: &Operand) -> Result<Option<Call>, FilterError> {
        match self.peek() {
            Some((Tok::LParen, _)) if !name.quoted => self.call(name.clone()).map(Some),
            _ => Ok(None),
        }
    }

    fn test(&mut self) -> Result<Expr, FilterError> {
        let lhs = self.operand("a field or protocol name")?;
        let call = self.maybe_call(&lhs)?;
        let slice = match self.peek() {
            Some((Tok::Slice(s), span)) => {
                self.bump();
                Some((s, span))
            }
            _ => None,
        };
        let mut masks = Vec::new();
        while let Some((Tok::BitAnd, _)) = self.peek() {
            self.bump();
            masks.push(self.operand("a mask (a number) after `&`")?);
        }
        let Some((Tok::Rel(rel), rel_span)) = self.peek() else {
            return Ok(Expr::Test(Box::new(Test { lhs, call, slice, masks, rel: None })));
        };
        // tshark 4.0: "Only a field may be tested for membership in a set."
        if rel == Rel::In && (slice.is_some() || call.is_some()) {
            return Err(self.error(rel_span, ErrorKind::InNeedsField));
        }
        if !masks.is_empty() && matches!(rel, Rel::In | Rel::Contains | Rel::Matches) {
            let found = Tok::Rel(rel).describe();
            let expected = "a comparison (`==`, `!=`, `<`, …) after a mask, `and`, `or` or the end of the filter";
            return Err(self.error(rel_span, ErrorKind::Unexpected { found, expected }));
        }
        self.bump();
        let rhs = if rel == Rel::In {
            Rhs::Set(self.set()?)
        } else {
            let v = self.operand("a value")?;
            match self.maybe_call(&v)? {
                Some(c) => Rhs::Call(c),
                None => Rhs::One(v),
            }
        };
        // `== 0x60 & 0x60`: arithmetic on the value's side.
        match self.peek() {
            Some((Tok::BitAnd, s)) => return Err(self.error(s, ErrorKind::MaskOnValue)),
            Some((Tok::Slice(_), s)) => return Err(self.error(s, ErrorKind::SliceOnValue)),
            _ => {}
        }
        Ok(Expr::Test(Box::new(Test { lhs, call, slice, masks, rel: Some((rel, rel_span, rhs)) })))
    }

    /// `{a b, c..d e .. f}`: elements apart by commas or white space (tshark 4.0
    /// wants commas; we take both).
    fn set(&mut self) -> Result<Vec<SetElem>, FilterError> {
        let open = match self.bump() {
            Some((Tok::LBrace, s)) => s,
            Some((t, s)) => {
                let found = t.describe();
                return Err(
                    self.error(s, ErrorKind::Unexpected { found, expected: "`{` after `in`" })
                );
            }
            None => {
                return Err(
                    self.error(self.end(), ErrorKind::EndTooSoon { expected: "`{` after `in`" })
                )
            }
        };
        let mut elems = Vec::new();
        loop {
            match self.peek() {
                Some((Tok::RBrace, s)) => {
                    self.bump();
                    if elems.is_empty() {
                        return Err(self.error(open.start..s.end, ErrorKind::EmptySet));
                    }
                    return Ok(elems);
                }
                Some((Tok::Comma, _)) if !elems.is_empty() => {
                    self.bump();
                    continue;
                }
                None => return Err(self.error(open, ErrorKind::UnclosedBrace)),
                _ => {}
            }
            let lo = self.operand("a value or `}`")?;
            // `1..3` as one word: split at the first `..`.
            if !lo.quoted {
                if let Some(k) = lo.text.find("..") {
                    let (a, b) = (&lo.text[..k], &lo.text[k + 2..]);
                    let s = lo.span.start;
                    let lo_op = Operand { text: a.to_string(), quoted: false, span: s..s + k };
                    let hi_op = Operand {
                        text: b.to_string(),
                        quoted: false,
                        span: s + k + 2..lo.span.end,
                    };
                    if a.is_empty() || b.is_empty() {
                        return Err(self.error(lo.span, ErrorKind::HalfRange));
                    }
                    elems.push(SetElem::Range(lo_op, hi_op));
                    continue;
                }
            }
            if let Some((Tok::DotDot, dots)) = self.peek() {
                self.bump();
                let hi = match self.peek() {
                    Some((Tok::Word(_) | Tok::Str(_), _)) => {
                        self.operand("the end of the range")?
                    }
                    _ => return Err(self.error(lo.span.start..dots.end, ErrorKind::HalfRange)),
                };
                elems.push(SetElem::Range(lo, hi));
            } else {
                elems.push(SetElem::One(lo));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lex::lex;
    use super::*;

    fn p(s: &str) -> Result<Expr, FilterError> {
        parse(s, lex(s)?)
    }

    fn shape(e: &Expr) -> String {
        match e {
            Expr::Or(all) => {
                format!("({})", all.iter().map(shape).collect::<Vec<_>>().join(" or "))
            }
            Expr::And(all) => {
                format!("({})", all.iter().map(shape).collect::<Vec<_>>().join(" and "))
            }
            Expr::Not(a) => format!("!{}", shape(a)),
            Expr::Test(t) => match &t.rel {
                None => t.lhs.text.clone(),
                Some((r, _, Rhs::One(v))) => format!("{}{}{}", t.lhs.text, r.symbol(), v.text),
                Some((r, _, Rhs::Set(s))) => format!("{}{}[{}]", t.lhs.text, r.symbol(), s.len()),
                Some((r, _, Rhs::Call(c))) => {
                    format!("{}{}{}()", t.lhs.text, r.symbol(), c.name.text)
                }
            },
        }
    }

    #[test]
    fn and_binds_tighter_than_or_and_not_tighter_than_and() {
        // tshark 4.0: `frame.number == 1 or frame.number == 2 and frame.number == 3` keeps frame 1.
        assert_eq!(shape(&p("a or b and c").unwrap()), "(a or (b and c))");
        assert_eq!(shape(&p("not a and b").unwrap()), "(!a and b)");
        assert_eq!(shape(&p("!(a || b) && c==1").unwrap()), "(!(a or b) and c==1)");
        assert_eq!(shape(&p("a or b or c").unwrap()), "(a or b or c)");
        assert_eq!(shape(&p("a and b and c or d").unwrap()), "((a and b and c) or d)");
    }

    #[test]
    fn sets_with_commas_spaces_and_ranges() {
        let e = p("x in {4 10, 0x11..0x13 20 .. 30}").unwrap();
        let Expr::Test(t) = e else { panic!("{e:?}") };
        let Test { rel: Some((Rel::In, _, Rhs::Set(s))), .. } = *t else { panic!("not a set") };
        assert_eq!(s.len(), 4);
        let SetElem::Range(lo, hi) = &s[2] else { panic!() };
        assert_eq!((lo.text.as_str(), hi.text.as_str()), ("0x11", "0x13"));
        assert_eq!((lo.span.clone(), hi.span.clone()), (12..16, 18..22));
        assert!(matches!(&s[3], SetElem::Range(a, b) if a.text == "20" && b.text == "30"));
    }

    #[test]
    fn masks_bind_to_the_field_before_the_comparison() {
        let e = p("a & 0x60 & 0x20 == 0x20 && b").unwrap();
        let Expr::And(mut all) = e else { panic!("{e:?}") };
        let t = Box::new(all.remove(0));
        let Expr::Test(t) = *t else { panic!("{t:?}") };
        let Test { masks, rel: Some((Rel::AnyEq, _, Rhs::One(v))), .. } = *t else {
            panic!("{t:?}")
        };
        let m: Vec<_> = masks.iter().map(|m| (m.text.as_str(), m.span.clone())).collect();
        assert_eq!(m, [("0x60", 4..8), ("0x20", 11..15)]);
        assert_eq!(v.text, "0x20");
        assert!(matches!(p("!a & 1").unwrap(), Expr::Not(_)), "`!` takes the masked test");
        let e = p("a & 1 in {1}").unwrap_err();
        assert_eq!((e.span.clone(), matches!(e.kind, ErrorKind::Unexpected { .. })), (6..8, true));
        assert!(matches!(p("a & 1 contains 1").unwrap_err().kind, ErrorKind::Unexpected { .. }));
        let e = p("a & 1 == 1 & 1").unwrap_err();
        assert_eq!((e.kind, e.span), (ErrorKind::MaskOnValue, 11..12));
        assert_eq!(p("(a & 1) == 1").unwrap_err().span, 8..10, "tshark 4.0 refuses it too");
        let e = p("a bitand 1").unwrap_err();
        assert_eq!(e.span, 2..8);
        assert!(e.to_string().contains("`bitwise_and`"), "{e}");
        assert!(matches!(p("a &").unwrap_err().kind, ErrorKind::EndTooSoon { .. }));
    }

    #[test]
    fn syntax_errors_point_at_the_token() {
        let e = p("a == 1 b").unwrap_err();
        assert_eq!(e.span, 7..8);
        assert!(matches!(e.kind, ErrorKind::Unexpected { .. }));
        assert_eq!(p("(a").unwrap_err().kind, ErrorKind::UnclosedParen);
        assert_eq!(p("a)").unwrap_err().kind, ErrorKind::UnbalancedParen);
        assert_eq!(p("a ==").unwrap_err().kind, ErrorKind::EndTooSoon { expected: "a value" });
        assert_eq!(p("x in {}").unwrap_err().kind, ErrorKind::EmptySet);
        assert_eq!(p("x in {1").unwrap_err().kind, ErrorKind::UnclosedBrace);
        assert_eq!(p("x in {1..}").unwrap_err().kind, ErrorKind::HalfRange);
        assert_eq!(p("x in 1").unwrap_err().span, 5..6);
        assert!(matches!(p("").unwrap_err().kind, ErrorKind::EndTooSoon { .. }));
        assert!(matches!(p("and").unwrap_err().kind, ErrorKind::Unexpected { .. }));
    }
}
