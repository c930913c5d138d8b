//! Fault rules from text: one rule in the `--fault` syntax, the `--fault` list and
//! a `--faults` TOML file. Every failure is a [`RuleError`] that points at the
//! offending word.
//!
//! Owns: [`parse_rule`], [`parse_rules`], [`parse_rules_toml`], [`rules_from`] and the
//! words and hints of their errors. Imports: the rule types, their limits and
//! [`RuleError`] from [`fault`](super); opcode and NAK names from `dissector`.
use std::ops::Range;
use std::path::Path;

use dissector::diag::line_col;
use dissector::text::parse_u64;
use dissector::wire::{NakCode, Opcode};

use super::{
    op_slug, Action, Dir, Offset, OpMatch, Real, Reply, Respond, Rule, RuleError, MAX_COPIES,
    MAX_DELAY_MS, MAX_READ_RESPONSE,
};

const ACTIONS: &str = "drop, corrupt, corrupt-icrc, ce, dup, delay, reorder, respond";
const KEYS: &str = "dir, qp, op, psn, nth, prob, seed, limit, icrc, and per action: at, xor (corrupt), copies (dup), ms (delay, reorder), \
                    with, code, timer, credits, len, fill, orig, rpsn, msn, real, reply-qp (respond)";
const REPLIES: &str = "ack, nak, rnr, read-response, atomic-ack";

/// An error in `input` at `span`, before its origin is known.
fn rule_error(input: &str, span: Range<usize>, message: String, hint: Option<String>) -> RuleError {
    RuleError { input: input.to_string(), span, message, hint, origin: None }
}

/// Parses one rule in the `--fault` syntax.
pub fn parse_rule(input: &str) -> Result<Rule, RuleError> {
    let err = |span: Range<usize>, message: String, hint: Option<String>| {
        rule_error(input, span, message, hint)
    };
    let mut words = tokens(input);
    let Some((action_span, action_word)) = words.next() else {
        return Err(err(
            0..0,
            "empty rule".into(),
            Some(format!("a rule starts with an action: {ACTIONS}")),
        ));
    };
    let Some(action) = parse_action(action_word) else {
        return Err(err(
            action_span,
            format!("unknown action `{}`", action_word.to_ascii_lowercase()),
            Some(format!("actions are {ACTIONS}; the action comes first, then key=value words")),
        ));
    };
    let mut rule = Rule::new(action);
    // `respond`'s reply first, so its own keys may come in any order.
    if let Action::Respond(r) = &mut rule.action {
        if let Some((span, w)) =
            tokens(input).find(|(_, w)| w.to_ascii_lowercase().starts_with("with="))
        {
            respond_key(r, "with", &w[5..]).map_err(|(what, hint)| {
                err(
                    span.start + 5..span.end,
                    format!("bad value `{}` for `with`: {what}", &w[5..]),
                    hint,
                )
            })?;
        }
    }
    let mut seen: Vec<String> = Vec::new();
    for (span, word) in words {
        let Some(eq) = word.find('=') else {
            return Err(err(
                span,
                format!("`{word}` is not a key=value word"),
                Some(format!("keys are {KEYS}")),
            ));
        };
        let key = word[..eq].to_ascii_lowercase();
        let w = Word {
            input,
            key: &key,
            value: &word[eq + 1..],
            kspan: span.start..span.start + eq,
            vspan: span.start + eq + 1..span.end,
        };
        if seen.contains(&key) {
            return Err(w.at_key(format!("`{key}` given twice")));
        }
        seen.push(key.clone());
        if w.value.is_empty() {
            return Err(w.bad("empty", None));
        }
        apply_key(&mut rule, &w)?;
    }
    check_rule(&rule, input, &seen)?;
    Ok(rule)
}

/// The action word, with its defaults.
fn parse_action(word: &str) -> Option<Action> {
    Some(match word.to_ascii_lowercase().as_str() {
        "drop" => Action::Drop,
        "corrupt" => Action::Corrupt { at: Offset::Payload(0), xor: 0xff },
        "corrupt-icrc" | "bad-icrc" => Action::CorruptIcrc,
        "ce" | "ecn-ce" | "ecn" => Action::Ce,
        "dup" | "duplicate" => Action::Dup { copies: 1 },
        "delay" => Action::Delay { ms: 10 },
        "reorder" => Action::Reorder { ms: 100 },
        "respond" => Action::Respond(Respond {
            reply: Reply::Ack { credits: 31 },
            psn_offset: 0,
            msn: None,
            real: Real::Keep,
            reply_qp: None,
        }),
        _ => return None,
    })
}

/// One `key=value` word of a rule (the key lowercased), and where its parts are.
struct Word<'a> {
    input: &'a str,
    key: &'a str,
    value: &'a str,
    kspan: Range<usize>,
    vspan: Range<usize>,
}

impl Word<'_> {
    /// An error pointing at the key.
    fn at_key(&self, message: String) -> RuleError {
        rule_error(self.input, self.kspan.clone(), message, None)
    }

    /// The value is wrong: `what`, pointing at the value.
    fn bad(&self, what: &str, hint: Option<String>) -> RuleError {
        let message = format!("bad value `{}` for `{}`: {what}", self.value, self.key);
        rule_error(self.input, self.vspan.clone(), message, hint)
    }
}

/// A key every action takes (`dir`, `qp`, `op`, `psn`, `nth`, `prob`, `seed`,
/// `limit`, `icrc`), else one of the action's own ([`action_key`]).
fn apply_key(rule: &mut Rule, w: &Word<'_>) -> Result<(), RuleError> {
    let (key, value) = (w.key, w.value);
    match key {
        "dir" | "from" => {
            let d = match (key, value.to_ascii_lowercase().as_str()) {
                ("dir", "a>b" | "a->b" | "ab") | ("from", "a") => Some(Dir::AtoB),
                ("dir", "b>a" | "b->a" | "ba") | ("from", "b") => Some(Dir::BtoA),
                ("dir", "any" | "both") => None,
                _ => return Err(w.bad("expected a>b, b>a or any (from=a|b)", None)),
            };
            rule.dir = d;
        }
        "qp" | "qpn" | "destqp" => {
            let q =
                parse_u64(value).ok_or_else(|| w.bad("expected a number like 0x11 or 17", None))?;
            if q > 0xff_ffff {
                return Err(w.bad("a QP number has 24 bits (at most 0xffffff)", None));
            }
            rule.qp = Some(q as u32);
        }
        "op" | "opcode" => {
            rule.op = Some(parse_op(value).ok_or_else(|| w.bad("unknown opcode", Some(op_hint())))?)
        }
        "psn" => match parse_range(value) {
            Some((a, b)) if a <= b && b <= 0xff_ffff => rule.psn = Some(a as u32..=b as u32),
            _ => return Err(w.bad("expected a PSN (24 bits) or a range like 4-7", None)),
        },
        "nth" => {
            rule.nth = Some(
                parse_u64(value)
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| w.bad("expected a count from 1 (1 = the first match)", None))?,
            )
        }
        "prob" | "p" => {
            let p: f64 =
                value.parse().map_err(|_| w.bad("expected a probability between 0 and 1", None))?;
            if !(0.0..=1.0).contains(&p) {
                return Err(w.bad("a probability is between 0 and 1", None));
            }
            rule.prob = Some(p);
        }
        "seed" => {
            rule.seed = Some(parse_u64(value).ok_or_else(|| w.bad("expected a number", None))?)
        }
        "limit" | "times" => {
            rule.limit = Some(
                parse_u64(value)
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| w.bad("expected a count from 1", None))?,
            )
        }
        "icrc" => {
            rule.fix_icrc = match value.to_ascii_lowercase().as_str() {
                "fix" | "recompute" => true,
                "keep" => false,
                _ => return Err(w.bad("expected fix or keep", None)),
            };
            if !rule.action.modifies() {
                return Err(w.at_key(format!(
                    "`icrc` only applies to actions that change bytes, not `{}`",
                    rule.action.name()
                )));
            }
        }
        _ => action_key(&mut rule.action, w)?,
    }
    Ok(())
}

/// A key of one action: `at`, `xor` (corrupt), `copies` (dup), `ms` (delay,
/// reorder) or a `respond` key; an unknown key is an error here.
fn action_key(action: &mut Action, w: &Word<'_>) -> Result<(), RuleError> {
    let (key, value) = (w.key, w.value);
    match key {
        "at" | "xor" => {
            let Action::Corrupt { at, xor } = action else {
                return Err(w.at_key(format!("`{key}` only applies to `corrupt`")));
            };
            if key == "at" {
                *at = parse_offset(value).ok_or_else(|| {
                    w.bad(
                        "expected N, ip+N, bth+N or payload+N",
                        Some("N counts bytes from the start of the frame or of that header".into()),
                    )
                })?;
            } else {
                *xor = parse_u64(value)
                    .filter(|&x| (1..=0xff).contains(&x))
                    .ok_or_else(|| w.bad("expected a non-zero byte like 0x01", None))?
                    as u8;
            }
        }
        "copies" => {
            let Action::Dup { copies } = action else {
                return Err(w.at_key("`copies` only applies to `dup`".into()));
            };
            *copies = parse_u64(value)
                .filter(|&n| (1..=MAX_COPIES as u64).contains(&n))
                .ok_or_else(|| w.bad(&format!("expected 1 to {MAX_COPIES}"), None))?
                as u32;
        }
        "ms" => {
            let (Action::Delay { ms } | Action::Reorder { ms }) = action else {
                return Err(w.at_key("`ms` only applies to `delay` and `reorder`".into()));
            };
            *ms = parse_u64(value).filter(|&n| n <= MAX_DELAY_MS).ok_or_else(|| {
                w.bad(&format!("expected milliseconds, at most {MAX_DELAY_MS}"), None)
            })?;
        }
        "with" | "code" | "timer" | "credits" | "len" | "fill" | "orig" | "rpsn" | "msn"
        | "real" | "reply-qp" => {
            let Action::Respond(r) = action else {
                return Err(w.at_key(format!("`{key}` only applies to `respond`")));
            };
            respond_key(r, key, value).map_err(|(what, hint)| w.bad(&what, hint))?;
            let needs = |ok: bool, which: &str| {
                if ok {
                    Ok(())
                } else {
                    Err(w.at_key(format!("`{key}` only applies to `with={which}`")))
                }
            };
            match key {
                "code" => needs(matches!(r.reply, Reply::Nak(_)), "nak")?,
                "timer" => needs(matches!(r.reply, Reply::Rnr { .. }), "rnr")?,
                "credits" => needs(matches!(r.reply, Reply::Ack { .. }), "ack")?,
                "len" | "fill" => {
                    needs(matches!(r.reply, Reply::ReadResponse { .. }), "read-response")?
                }
                "orig" => needs(matches!(r.reply, Reply::AtomicAck { .. }), "atomic-ack")?,
                _ => {}
            }
        }
        _ => {
            return Err(rule_error(
                w.input,
                w.kspan.clone(),
                format!("unknown key `{key}`"),
                Some(format!("keys are {KEYS}")),
            ))
        }
    }
    Ok(())
}

/// What only the whole rule shows: `with=nak` without a `code`, `nth` with `prob`.
fn check_rule(rule: &Rule, input: &str, seen: &[String]) -> Result<(), RuleError> {
    if let Action::Respond(r) = &rule.action {
        if let Reply::Nak(0) = r.reply {
            if !seen.iter().any(|s| s == "code") {
                let at = input.find("with=").unwrap_or(0);
                return Err(rule_error(
                    input,
                    at..at + 8,
                    "`with=nak` needs a `code`".into(),
                    Some(nak_codes()),
                ));
            }
        }
    }
    if rule.nth.is_some() && rule.prob.is_some() {
        let at = input.find("prob").unwrap_or(0);
        return Err(rule_error(
            input,
            at..at + 4,
            "`nth` and `prob` exclude each other".into(),
            Some("pick one frame with nth, or many at random with prob".into()),
        ));
    }
    Ok(())
}

/// `4` or `4-7`: a number, or a low-high pair (order not checked).
fn parse_range(v: &str) -> Option<(u64, u64)> {
    match v.split_once('-') {
        Some((a, b)) => Some((parse_u64(a)?, parse_u64(b)?)),
        None => parse_u64(v).map(|n| (n, n)),
    }
}

fn nak_codes() -> String {
    let keys: Vec<&str> = NakCode::ALL.iter().map(|c| c.key()).collect();
    format!("codes are {}", keys.join(", "))
}

/// One `respond` key into `r`: what is wrong with the value otherwise.
fn respond_key(r: &mut Respond, key: &str, value: &str) -> Result<(), (String, Option<String>)> {
    let num = |max: u64, what: &str| {
        parse_u64(value).filter(|&n| n <= max).ok_or_else(|| (what.to_string(), None))
    };
    match key {
        "with" => {
            let reply = match value.to_ascii_lowercase().as_str() {
                "ack" => Reply::Ack { credits: 31 },
                "nak" => Reply::Nak(0),
                "rnr" | "rnr-nak" => Reply::Rnr { first: 0, last: 0 },
                "read-response" | "read" => Reply::ReadResponse { len: None, fill: 0 },
                "atomic-ack" => Reply::AtomicAck { orig: 0 },
                _ => return Err(("unknown response".into(), Some(format!("responses are {REPLIES}")))),
            };
            // Read first (see `parse_rule`): given again, it keeps its keys' values.
            if reply.key() != r.reply.key() {
                r.reply = reply;
            }
        }
        "code" => {
            let c: NakCode = value.parse().map_err(|_| ("unknown NAK code".to_string(), Some(nak_codes())))?;
            if let Reply::Nak(v) = &mut r.reply {
                *v = c.value();
            }
        }
        "timer" => {
            let Some((a, b)) = parse_range(value) else { return Err(("expected a timer code 0–31 or a range like 1-31".into(), None)) };
            if a > b || b > 31 {
                return Err(("timer codes are 0–31 (IBA table 45), a range low-high".into(), None));
            }
            if let Reply::Rnr { first, last } = &mut r.reply {
                (*first, *last) = (a as u8, b as u8);
            }
        }
        "credits" => {
            let c = num(31, "expected a credit count 0–31 (31: no end-to-end credit)")? as u8;
            if let Reply::Ack { credits } = &mut r.reply {
                *credits = c;
            }
        }
        "len" => {
            let l = num(MAX_READ_RESPONSE as u64, &format!("expected a length of at most {MAX_READ_RESPONSE} bytes (one packet)"))? as u32;
            if let Reply::ReadResponse { len, .. } = &mut r.reply {
                *len = Some(l);
            }
        }
        "fill" => {
            let b = num(0xff, "expected a byte like 0x5a")? as u8;
            if let Reply::ReadResponse { fill, .. } = &mut r.reply {
                *fill = b;
            }
        }
        "orig" => {
            let o = parse_u64(value).ok_or_else(|| ("expected a 64-bit number".to_string(), None))?;
            if let Reply::AtomicAck { orig } = &mut r.reply {
                *orig = o;
            }
        }
        "rpsn" => {
            let (neg, digits) = match value.as_bytes().first() {
                Some(b'-') => (true, &value[1..]),
                Some(b'+') => (false, &value[1..]),
                _ => return Err(("expected an offset from the request's PSN like +3 or -1".into(), None)),
            };
            let n = parse_u64(digits).filter(|&n| n < 1 << 23).ok_or_else(|| ("expected an offset below 2^23 like +3".to_string(), None))? as i32;
            r.psn_offset = if neg { -n } else { n };
        }
        "msn" => r.msn = Some(num(0xff_ffff, "an MSN has 24 bits")? as u32),
        "real" => {
            r.real = match value.to_ascii_lowercase().as_str() {
                "keep" => Real::Keep,
                "withhold" => Real::Withhold,
                "lost" | "drop" => Real::Lost,
                _ => return Err(("expected keep, withhold or lost".into(), Some("keep: the real answer goes too; withhold: the responder acts but its answer is held back; lost: the request never reaches it".into()))),
            }
        }
        "reply-qp" => r.reply_qp = Some(num(0xff_ffff, "a QP number has 24 bits")? as u32),
        other => return Err((format!("`{other}` is not a `respond` key"), None)),
    }
    Ok(())
}

/// Whitespace-separated words with their byte spans.
fn tokens(s: &str) -> impl Iterator<Item = (Range<usize>, &str)> {
    let mut rest = 0;
    std::iter::from_fn(move || {
        let start = rest + s[rest..].find(|c: char| !c.is_whitespace())?;
        let end = s[start..].find(char::is_whitespace).map_or(s.len(), |e| start + e);
        rest = end;
        Some((start..end, &s[start..end]))
    })
}

fn parse_offset(s: &str) -> Option<Offset> {
    let lower = s.to_ascii_lowercase();
    for (name, f) in [
        ("payload", Offset::Payload as fn(usize) -> Offset),
        ("bth", Offset::Bth),
        ("ip", Offset::Ip),
    ] {
        if let Some(rest) = lower.strip_prefix(name) {
            return match rest {
                "" => Some(f(0)),
                r => Some(f(parse_u64(r.strip_prefix('+')?)? as usize)),
            };
        }
    }
    Some(Offset::Frame(parse_u64(&lower)? as usize))
}

pub(super) fn parse_op(v: &str) -> Option<OpMatch> {
    if let Some(n) = parse_u64(v) {
        return u8::try_from(n).ok().map(OpMatch::Exact);
    }
    let want = op_slug(v);
    let want = match want.as_str() {
        "ack" => "acknowledge".to_string(),
        "atomic-ack" => "atomic-acknowledge".to_string(),
        "cnp" => return Some(OpMatch::Exact(0x81)),
        "read-request"
        | "read-response-first"
        | "read-response-middle"
        | "read-response-last"
        | "read-response-only"
        | "write-first"
        | "write-middle"
        | "write-last"
        | "write-only"
        | "write-last-with-immediate"
        | "write-only-with-immediate" => format!("rdma-{want}"),
        _ => want,
    };
    // `rc-send-only` names one opcode; `send-only` the operation on any transport.
    for code in 0..=255u8 {
        if let Some(info) = Opcode(code).info() {
            let name = op_slug(info.name);
            if name == want {
                return Some(OpMatch::Operation(code & 0x1f));
            }
            if format!("{}-{name}", info.transport.abbrev().to_ascii_lowercase()) == want {
                return Some(OpMatch::Exact(code));
            }
        }
    }
    None
}

fn op_hint() -> String {
    "use a number (0x11) or a name: send-only, send-first, write-only, read-request, read-response-only, ack, \
     atomic-ack, cmpswap, fetchadd, cnp …; prefix rc-/uc-/ud-/xrc- for one transport (ud-send-only)"
        .into()
}

/// Parses every `--fault` text, naming which one failed.
pub fn parse_rules(texts: &[String]) -> Result<Vec<Rule>, RuleError> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            parse_rule(t).map_err(|mut e| {
                e.origin = Some(format!("--fault #{}", i + 1));
                e
            })
        })
        .collect()
}

/// Fault rules from `--fault` texts, then a `--faults` file; the seed from
/// `seed_arg`, else the file's, else 1.
pub fn rules_from(
    texts: &[String],
    file: Option<&Path>,
    seed_arg: Option<u64>,
) -> Result<(Vec<Rule>, u64), RuleError> {
    let mut rules = parse_rules(texts)?;
    let mut seed = None;
    if let Some(f) = file {
        let text = std::fs::read_to_string(f).map_err(|e| RuleError {
            input: String::new(),
            span: 0..0,
            message: format!("cannot read the rule file: {e}"),
            hint: None,
            origin: Some(f.display().to_string()),
        })?;
        let (more, s) = parse_rules_toml(&text, f)?;
        rules.extend(more);
        seed = s;
    }
    Ok((rules, seed_arg.or(seed).unwrap_or(1)))
}

/// A rule file: `seed = N` and `[[rule]]` tables (see the module docs).
pub fn parse_rules_toml(text: &str, file: &Path) -> Result<(Vec<Rule>, Option<u64>), RuleError> {
    let at = |span: Option<Range<usize>>| -> String {
        match span {
            Some(s) => {
                let (line, col) = line_col(text, s.start);
                format!("{}:{line}:{col}", file.display())
            }
            None => file.display().to_string(),
        }
    };
    let file_err = |span: Option<Range<usize>>, message: String, hint: Option<String>| RuleError {
        input: String::new(),
        span: 0..0,
        message,
        hint,
        origin: Some(at(span)),
    };
    let doc: toml::Spanned<toml::Table> = toml::from_str(text).map_err(|e| {
        let msg = e.message().to_string();
        file_err(e.span(), format!("not valid TOML: {msg}"), None)
    })?;
    let mut seed = None;
    let mut rules = Vec::new();
    for (key, value) in doc.get_ref() {
        match (key.as_str(), value) {
            ("seed", toml::Value::Integer(n)) if *n >= 0 => seed = Some(*n as u64),
            ("seed", _) => {
                return Err(file_err(None, "`seed` must be a non-negative integer".into(), None))
            }
            ("rule", toml::Value::Array(list)) => {
                for (i, item) in list.iter().enumerate() {
                    let toml::Value::Table(t) = item else {
                        return Err(file_err(
                            None,
                            format!("rule #{} is not a table: use [[rule]]", i + 1),
                            None,
                        ));
                    };
                    rules.push(rule_from_table(t, i + 1, text, &at)?);
                }
            }
            (other, _) => {
                return Err(file_err(
                    None,
                    format!("unknown top-level key `{other}`"),
                    Some("a rule file has `seed = N` and [[rule]] tables".into()),
                ))
            }
        }
    }
    Ok((rules, seed))
}

/// Turns one `[[rule]]` table into the text syntax and parses that, so both forms
/// share every check; errors point at the line of the table's first key.
fn rule_from_table(
    t: &toml::Table,
    n: usize,
    text: &str,
    at: &dyn Fn(Option<Range<usize>>) -> String,
) -> Result<Rule, RuleError> {
    // Find the table's position: the n-th `[[rule]]` header.
    let header = text.match_indices("[[rule]]").nth(n - 1).map(|(i, _)| i..i + 8);
    let origin = format!("{} (rule #{n})", at(header));
    let fail = |message: String, hint: Option<String>| RuleError {
        input: String::new(),
        span: 0..0,
        message,
        hint,
        origin: Some(origin.clone()),
    };
    let action = match t.get("action") {
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => return Err(fail("`action` must be a string".into(), None)),
        None => {
            return Err(fail("missing `action`".into(), Some(format!("actions are {ACTIONS}"))))
        }
    };
    let mut line = action;
    for (k, v) in t {
        if k == "action" {
            continue;
        }
        let v = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            _ => return Err(fail(format!("`{k}` must be a string or a number"), None)),
        };
        if v.chars().any(char::is_whitespace) {
            return Err(fail(format!("`{k}` must not contain spaces"), None));
        }
        line.push_str(&format!(" {k}={v}"));
    }
    // The rule text was rebuilt from the table, it is not the file's: the error
    // names the file and the word, and shows no excerpt of text the file lacks.
    parse_rule(&line).map_err(|e| {
        let word = e.input.get(e.span.clone()).unwrap_or("");
        let message =
            if word.is_empty() { e.message } else { format!("{} (at `{word}`)", e.message) };
        fail(message, e.hint)
    })
}
