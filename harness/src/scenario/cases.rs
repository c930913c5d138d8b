//! Parameterised scenarios: one file, many named cases.
//!
//! A file with a `[cases]` table (every combination of its lists) and/or
//! `[[case]]` tables (an explicit list) is one scenario per case. A string in the
//! rest of the file that is exactly `"${p}"` becomes the value of parameter `p`
//! itself (any TOML value); `${p}` inside a longer string becomes the value's
//! text; `$${` is a literal `${`.
//!
//! Expansion is textual at the level of TOML values: each string literal that
//! holds a placeholder is replaced, in a copy of the file, by a TOML literal of
//! its value ([`inline`]); everything else keeps its bytes. A [`SpanMap`] maps
//! the copy's byte spans back to the file's, so every diagnostic the check finds
//! in a case points at the file (a problem inside a substituted value, at the
//! placeholder that put it there).
//!
//! Owns: the `[cases]` / `[[case]]` format, placeholders, case names and their
//! limits. Imports: [`super::diag`] and dissector's `UnknownName`; `toml`, `serde`.
use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::{Spanned, Value};

use super::diag::{Diagnostic, Severity, Source, SpanMap};

/// The most cases one file may expand to.
pub(crate) const MAX_CASES: usize = 4096;

/// Keys of a `[[case]]` table that are not parameters.
const RESERVED: [&str; 2] = ["name", "spec"];

/// One case of a file: its text (the file's own when the file has no cases).
#[derive(Debug)]
pub(crate) struct Case {
    /// `access=local_write, op=read`, or the `[[case]]`'s name (with the
    /// product's parameters after it); none for a file without cases.
    pub(crate) label: Option<String>,
    /// The file with this case's values in place of its placeholders.
    pub(crate) text: String,
    /// From spans of `text` back to the file's.
    pub(crate) map: SpanMap,
    /// The `spec` ids the case adds, and where each is in `text`.
    pub(crate) spec: Vec<(String, Range<usize>)>,
}

/// The file expanded: its cases, and the warnings about the parameters.
#[derive(Debug)]
pub(crate) struct Expanded {
    pub(crate) cases: Vec<Case>,
    pub(crate) warnings: Vec<Diagnostic>,
}

impl Expanded {
    /// A file without placeholders (format 1 and 2): one case, its text as it is.
    pub(crate) fn plain(text: &str) -> Expanded {
        Expanded {
            cases: vec![Case {
                label: None,
                text: text.to_string(),
                map: SpanMap::default(),
                spec: Vec::new(),
            }],
            warnings: Vec::new(),
        }
    }
}

/// A table of the file, with the place of each value.
type Table = BTreeMap<String, Spanned<Value>>;

/// The parameter tables, read on their own (the rest of the file is ignored here).
#[derive(Deserialize)]
struct Params {
    #[serde(default)]
    cases: Option<Spanned<BTreeMap<String, Spanned<Value>>>>,
    #[serde(default)]
    case: Option<Spanned<Vec<Spanned<Table>>>>,
}

/// One placeholder in a string literal.
#[derive(Debug)]
struct Use {
    name: String,
    /// Where `${name}` is in the file (the literal's span when it cannot be found).
    span: Range<usize>,
}

/// A string literal of the file holding placeholders.
#[derive(Debug)]
struct Literal {
    span: Range<usize>,
    /// Text and placeholders in order; `Whole` when the string is exactly one.
    parts: Vec<Part>,
    whole: bool,
}

#[derive(Debug)]
enum Part {
    Text(String),
    Param(Use),
}

/// Whether `s` can name a parameter.
fn ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == '-')
}

/// The placeholders of a string whose literal is at `span`; an error for a `${`
/// that does not make one.
fn scan(src: &Source, s: &str, span: &Range<usize>) -> Result<Option<Literal>, Box<Diagnostic>> {
    if !s.contains("${") {
        return Ok(None);
    }
    let raw = src.text.get(span.clone()).unwrap_or("");
    let mut raw_at = raw.match_indices("${").map(|(i, _)| span.start + i);
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        text.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("$${") {
            text.push_str("${");
            raw_at.next();
            rest = after;
            continue;
        }
        let Some(after) = tail.strip_prefix("${") else {
            text.push('$');
            rest = &tail[1..];
            continue;
        };
        let at = raw_at.next().unwrap_or(span.start);
        let close = after.find('}');
        let name = close.map(|c| &after[..c]).unwrap_or("");
        let Some(c) = close.filter(|_| ident(name)) else {
            return Err(Box::new(src.diag(
                Some(at..at + 2),
                "`${` starts a placeholder, but no parameter name and `}` follow",
                Some("write `${name}` for a parameter of [cases] or [[case]], or `$${` for a literal `${`".into()),
            )));
        };
        if !text.is_empty() {
            parts.push(Part::Text(std::mem::take(&mut text)));
        }
        // The raw literal spells the placeholder as the value does unless it was
        // written with escapes: then the literal is the place.
        let raw_len = name.len() + 3;
        let span_of = if src.text.get(at..at + raw_len) == Some(&format!("${{{name}}}")[..]) {
            at..at + raw_len
        } else {
            span.clone()
        };
        parts.push(Part::Param(Use { name: name.to_string(), span: span_of }));
        rest = &after[c + 1..];
    }
    text.push_str(rest);
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    let whole = parts.len() == 1 && matches!(parts[0], Part::Param(_));
    Ok(Some(Literal { span: span.clone(), parts, whole }))
}

/// Every string literal with placeholders in `item`.
fn walk_item(
    src: &Source,
    item: &toml_edit::Item,
    lits: &mut Vec<Literal>,
    out: &mut Vec<Diagnostic>,
) {
    match item {
        toml_edit::Item::Value(v) => walk(src, v, lits, out),
        toml_edit::Item::Table(t) => t.iter().for_each(|(_, x)| walk_item(src, x, lits, out)),
        toml_edit::Item::ArrayOfTables(a) => {
            a.iter().flat_map(|t| t.iter()).for_each(|(_, x)| walk_item(src, x, lits, out))
        }
        toml_edit::Item::None => {}
    }
}

fn walk(src: &Source, v: &toml_edit::Value, lits: &mut Vec<Literal>, out: &mut Vec<Diagnostic>) {
    match v {
        toml_edit::Value::String(f) => {
            let Some(span) = f.span() else { return };
            match scan(src, f.value(), &span) {
                Ok(Some(l)) => lits.push(l),
                Ok(None) => {}
                Err(d) => out.push(*d),
            }
        }
        toml_edit::Value::Array(a) => a.iter().for_each(|x| walk(src, x, lits, out)),
        toml_edit::Value::InlineTable(t) => t.iter().for_each(|(_, x)| walk(src, x, lits, out)),
        _ => {}
    }
}

/// A TOML literal of `v`, on one line.
pub(crate) fn inline(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let mut o = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => o.push_str("\\\""),
                    '\\' => o.push_str("\\\\"),
                    '\n' => o.push_str("\\n"),
                    '\t' => o.push_str("\\t"),
                    '\r' => o.push_str("\\r"),
                    c if c.is_control() => o.push_str(&format!("\\u{:04X}", c as u32)),
                    c => o.push(c),
                }
            }
            o.push('"');
            o
        }
        Value::Integer(i) => i.to_string(),
        Value::Float(f) if f.is_nan() => "nan".into(),
        Value::Float(f) if f.is_infinite() => (if *f > 0.0 { "inf" } else { "-inf" }).into(),
        Value::Float(f) => format!("{f:?}"),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => d.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        Value::Table(t) => {
            let kv: Vec<String> =
                t.iter().map(|(k, v)| format!("{} = {}", key(k), inline(v))).collect();
            if kv.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", kv.join(", "))
            }
        }
    }
}

fn key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        k.to_string()
    } else {
        inline(&Value::String(k.to_string()))
    }
}

/// A value's text in a case's name and in a longer string: a string as it is,
/// an array's items joined with `+`, a table as `k:v` joined with `+`.
pub(crate) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) if a.is_empty() => "none".into(),
        Value::Array(a) => a.iter().map(text_of).collect::<Vec<_>>().join("+"),
        Value::Table(t) => {
            t.iter().map(|(k, v)| format!("{k}:{}", text_of(v))).collect::<Vec<_>>().join("+")
        }
        Value::Float(f) => format!("{f}"),
        other => inline(other),
    }
}

/// One explicit `[[case]]`, read.
struct Explicit {
    span: Range<usize>,
    name: Option<String>,
    spec: Vec<(String, Range<usize>)>,
    values: Vec<(String, Value)>,
}

/// Reads the parameter tables and expands the file into its cases. A file with
/// neither `[cases]` nor `[[case]]` is one case, its text as it is.
pub(crate) fn expand(src: &Source) -> Result<Expanded, Vec<Diagnostic>> {
    let mut out = Vec::new();
    let params: Params = toml::from_str(src.text).map_err(|e| {
        let hint = "`[cases]` holds lists of values (`op = [\"write\", \"read\"]`), `[[case]]` a table of one value per parameter (and `name`, `spec`)";
        vec![src.diag(e.span(), e.message().trim().to_string(), Some(hint.into()))]
    })?;
    // Every string of the file outside the parameter tables, with its span.
    let doc = toml_edit::ImDocument::parse(src.text)
        .map_err(|e| vec![src.diag(e.span(), e.message().trim().to_string(), None)])?;
    let mut lits = Vec::new();
    for (k, item) in doc.as_table().iter() {
        if k != "cases" && k != "case" {
            walk_item(src, item, &mut lits, &mut out);
        }
    }
    lits.sort_by_key(|l| l.span.start);

    // The product's parameters, in the file's order.
    let mut product: Vec<(String, Range<usize>, Vec<Value>)> = Vec::new();
    if let Some(c) = &params.cases {
        let mut entries: Vec<_> = c.get_ref().iter().collect();
        entries.sort_by_key(|(_, v)| v.span().start);
        for (k, v) in entries {
            let span = v.span();
            if !ident(k) || RESERVED.contains(&k.as_str()) {
                out.push(bad_param_name(src, k, span));
                continue;
            }
            match v.get_ref() {
                Value::Array(a) if a.is_empty() => out.push(src.diag(
                    Some(span),
                    format!("`{k}` lists no values: it would make no case"),
                    Some("give at least one value, or remove the parameter".into()),
                )),
                Value::Array(a) => product.push((k.clone(), span, a.clone())),
                _ => out.push(src.diag(
                    Some(span),
                    format!("`{k}` in [cases] is not a list of values"),
                    Some(format!("every combination is made of the lists in [cases]: `{k} = [...]`; one value for every case needs no parameter")),
                )),
            }
        }
        if c.get_ref().is_empty() {
            out.push(src.diag(
                Some(c.span()),
                "[cases] lists no parameters",
                Some("e.g. `op = [\"write\", \"read\"]`, or remove the table".into()),
            ));
        }
    }
    // The explicit cases.
    let mut explicit: Vec<Explicit> = Vec::new();
    if let Some(list) = &params.case {
        if list.get_ref().is_empty() {
            out.push(src.diag(Some(list.span()), "`case` lists no cases", None));
        }
        for t in list.get_ref() {
            let mut e =
                Explicit { span: t.span(), name: None, spec: Vec::new(), values: Vec::new() };
            let mut entries: Vec<_> = t.get_ref().iter().collect();
            entries.sort_by_key(|(_, v)| v.span().start);
            for (k, v) in entries {
                match (k.as_str(), v.get_ref()) {
                    ("name", Value::String(s)) if !s.trim().is_empty() => e.name = Some(s.clone()),
                    ("name", _) => out.push(src.diag(
                        Some(v.span()),
                        "a case's `name` is a string that is not empty",
                        None,
                    )),
                    ("spec", Value::Array(ids)) => {
                        // Each id's span: the array's items in order in its text.
                        let spans = string_spans(src.text, v.span());
                        for (i, id) in ids.iter().enumerate() {
                            match id {
                                Value::String(s) => e.spec.push((
                                    s.clone(),
                                    spans.get(i).cloned().unwrap_or_else(|| v.span()),
                                )),
                                _ => out.push(src.diag(
                                    Some(v.span()),
                                    "`spec` lists catalogue ids, as strings",
                                    None,
                                )),
                            }
                        }
                    }
                    ("spec", _) => out.push(src.diag(
                        Some(v.span()),
                        "`spec` lists catalogue ids: `spec = [\"mr.access.remote-write-denied\"]`",
                        None,
                    )),
                    (k, _) if !ident(k) => out.push(bad_param_name(src, k, v.span())),
                    (k, val) => {
                        if product.iter().any(|(p, _, _)| p == k) {
                            out.push(src.diag(
                                Some(v.span()),
                                format!("`{k}` is a parameter of [cases] too"),
                                Some("a parameter takes its values from [cases] (every combination) or from the [[case]] tables, not both".into()),
                            ));
                        }
                        e.values.push((k.to_string(), val.clone()));
                    }
                }
            }
            explicit.push(e);
        }
        // Every explicit case gives the same parameters.
        if let Some(first) = explicit.first() {
            let names = |e: &Explicit| {
                let mut v: Vec<String> = e.values.iter().map(|(k, _)| k.clone()).collect();
                v.sort();
                v
            };
            let want = names(first);
            for (i, e) in explicit.iter().enumerate().skip(1) {
                let got = names(e);
                if got != want {
                    let missing: Vec<&String> = want.iter().filter(|k| !got.contains(k)).collect();
                    let extra: Vec<&String> = got.iter().filter(|k| !want.contains(k)).collect();
                    let mut what = Vec::new();
                    if !missing.is_empty() {
                        what.push(format!("gives no {}", ticked(&missing)));
                    }
                    if !extra.is_empty() {
                        what.push(format!("gives {}, which the first does not", ticked(&extra)));
                    }
                    out.push(src.diag(
                        Some(e.span.clone()),
                        format!("case {} {}", i + 1, what.join(" and ")),
                        Some("every [[case]] gives a value to the same parameters".into()),
                    ));
                }
            }
        }
    }
    let has_cases = params.cases.is_some() || params.case.is_some();
    let known: Vec<String> = product
        .iter()
        .map(|(k, _, _)| k.clone())
        .chain(explicit.first().into_iter().flat_map(|e| e.values.iter().map(|(k, _)| k.clone())))
        .collect();
    // Every placeholder names a parameter.
    for l in &lits {
        for p in &l.parts {
            let Part::Param(u) = p else { continue };
            if known.contains(&u.name) {
                continue;
            }
            let hint = if !has_cases {
                Some("a placeholder takes its values from the file's [cases] or [[case]] tables, which it has none of; write `$${` for a literal `${`".into())
            } else {
                dissector::text::UnknownName::among(
                    "parameter",
                    &u.name,
                    &u.name,
                    known.iter().map(String::as_str),
                )
                .hint()
                .or_else(|| Some(format!("the parameters: {}", known.join(", "))))
            };
            out.push(src.diag(
                Some(u.span.clone()),
                format!("unknown parameter `{}` in a placeholder", u.name),
                hint,
            ));
        }
    }
    let mut warnings = Vec::new();
    let used = |k: &str| {
        lits.iter().any(|l| l.parts.iter().any(|p| matches!(p, Part::Param(u) if u.name == k)))
    };
    for (k, span, _) in &product {
        if !used(k) {
            warnings.push(unused(src, k, span.clone()));
        }
    }
    if let Some(e) = explicit.first() {
        for (k, _) in &e.values {
            if !used(k) {
                warnings.push(unused(src, k, e.span.clone()));
            }
        }
    }
    let combos = product.iter().fold(1usize, |n, (_, _, v)| n.saturating_mul(v.len()));
    let total = combos.saturating_mul(explicit.len().max(1));
    if total > MAX_CASES {
        let span = params
            .cases
            .as_ref()
            .map(Spanned::span)
            .or_else(|| params.case.as_ref().map(Spanned::span));
        out.push(src.diag(
            span,
            format!("the file expands to {total} cases; at most {MAX_CASES}"),
            Some("split it into several files, or list the combinations worth running with [[case]] instead of every one in [cases]".into()),
        ));
    }
    if !out.is_empty() {
        return Err(out);
    }
    if !has_cases {
        // One case, the plain file (with any `$${` made `${`).
        let mut case = substitute(src, &lits, &[], String::new(), Vec::new());
        case.label = None;
        return Ok(Expanded { cases: vec![case], warnings });
    }
    // Every case: explicit ones outside, the product inside, its first parameter
    // varying slowest.
    let explicit_or_none: Vec<Option<&Explicit>> =
        if explicit.is_empty() { vec![None] } else { explicit.iter().map(Some).collect() };
    let mut cases = Vec::new();
    let mut names: BTreeMap<String, Range<usize>> = BTreeMap::new();
    for e in explicit_or_none {
        for i in 0..combos {
            let mut values: Vec<(&str, &Value)> = Vec::new();
            let mut label: Vec<String> = Vec::new();
            if let Some(e) = e {
                values.extend(e.values.iter().map(|(k, v)| (k.as_str(), v)));
                match &e.name {
                    Some(n) => label.push(n.clone()),
                    None => {
                        label.extend(e.values.iter().map(|(k, v)| format!("{k}={}", text_of(v))))
                    }
                }
            }
            let mut rest = i;
            let mut picks = vec![0; product.len()];
            for (j, (_, _, v)) in product.iter().enumerate().rev() {
                picks[j] = rest % v.len();
                rest /= v.len();
            }
            for ((k, _, v), &j) in product.iter().zip(&picks) {
                values.push((k.as_str(), &v[j]));
                label.push(format!("{k}={}", text_of(&v[j])));
            }
            let label = label.join(", ");
            let at = e.map(|e| e.span.clone()).or_else(|| params.cases.as_ref().map(Spanned::span));
            if let Some(first) = names.get(&label) {
                let (line, _) = dissector::diag::line_col(src.text, first.start);
                return Err(vec![src.diag(
                    at,
                    format!("two cases are named `{label}`"),
                    Some(format!("the other is at line {line}; give each [[case]] its own `name`, or values that differ")),
                )]);
            }
            names.insert(label.clone(), at.unwrap_or(0..0));
            cases.push(substitute(
                src,
                &lits,
                &values,
                label,
                e.map(|e| e.spec.clone()).unwrap_or_default(),
            ));
        }
    }
    Ok(Expanded { cases, warnings })
}

fn ticked(names: &[&String]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

fn bad_param_name(src: &Source, k: &str, span: Range<usize>) -> Diagnostic {
    src.diag(
        Some(span),
        format!("`{k}` cannot name a parameter"),
        Some("a parameter's name is letters, digits, `_` and `-`, starting with a letter or `_`; `name` and `spec` are a [[case]]'s own keys".into()),
    )
}

fn unused(src: &Source, k: &str, span: Range<usize>) -> Diagnostic {
    let mut d = src.diag(
        Some(span),
        format!("parameter `{k}` is used by no placeholder: its cases would all be alike"),
        Some(format!("write `\"${{{k}}}\"` where its value goes, or remove it")),
    );
    d.severity = Severity::Warning;
    d
}

/// The spans of the basic or literal strings in `text[span]`, in order.
fn string_spans(text: &str, span: Range<usize>) -> Vec<Range<usize>> {
    let Some(s) = text.get(span.clone()) else { return Vec::new() };
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let q = b[i];
        if q == b'"' || q == b'\'' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != q {
                if q == b'"' && b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            out.push(span.start + start..span.start + (i + 1).min(b.len()));
        } else if q == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        }
        i += 1;
    }
    out
}

/// One case's text: every literal with placeholders replaced.
fn substitute(
    src: &Source,
    lits: &[Literal],
    values: &[(&str, &Value)],
    label: String,
    spec: Vec<(String, Range<usize>)>,
) -> Case {
    let value = |n: &str| values.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
    let mut text = String::with_capacity(src.text.len());
    let mut edits = Vec::new();
    let mut at = 0;
    for l in lits {
        text.push_str(&src.text[at..l.span.start]);
        let new = if l.whole {
            match &l.parts[0] {
                Part::Param(u) => value(&u.name).map(inline).unwrap_or_default(),
                Part::Text(_) => String::new(),
            }
        } else {
            let s: String = l
                .parts
                .iter()
                .map(|p| match p {
                    Part::Text(t) => t.clone(),
                    Part::Param(u) => value(&u.name).map(text_of).unwrap_or_default(),
                })
                .collect();
            inline(&Value::String(s))
        };
        let from = text.len();
        text.push_str(&new);
        edits.push((l.span.clone(), from..text.len()));
        at = l.span.end;
    }
    text.push_str(&src.text[at..]);
    let map = SpanMap { edits };
    let spec =
        spec.into_iter().map(|(id, s)| (id, map.to_text(s.start)..map.to_text(s.end))).collect();
    Case { label: Some(label), text, map, spec }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::scenario::check::parse_cases;
    use crate::scenario::diag::SpanMap;
    use crate::scenario::model::Scenario;

    /// A WRITE or READ into `target`, `{access}` its access and `{op}` the verb,
    /// followed by `tail`.
    fn file(access: &str, op: &str, tail: &str) -> String {
        format!(
            "name = \"MR ${{op}}\"\nspec = [\"mr.access.remote-write-denied\"]\n[endpoints.a]\n[endpoints.b]\n\
             [[qp]]\nname = \"q\"\ntype = \"rc\"\nbetween = [\"b\", \"a\"]\n\
             [[mr]]\nname = \"src\"\non = \"a\"\nsize = 16\n\
             [[mr]]\nname = \"target\"\non = \"b\"\nsize = \"${{size}}\"\naccess = {access}\n\
             [[step]]\non = \"a\"\nop = {op}\nqp = \"q\"\nwr_id = 1\nsge = [{{ mr = \"src\" }}]\nremote = {{ mr = \"target\" }}\n\
             [[expect.completion]]\non = \"a\"\nwr_id = 1\nstatus = \"IBV_WC_SUCCESS\"\n{tail}"
        )
    }

    fn load(text: &str) -> Result<Vec<Scenario>, Vec<Diagnostic>> {
        parse_cases(Path::new("p.toml"), text)
    }

    fn names(v: &[Scenario]) -> Vec<&str> {
        v.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn the_product_of_the_lists_in_file_order() {
        let t = file(
            "\"${access}\"",
            "\"${op}\"",
            "[cases]\nop = [\"write\", \"read\"]\naccess = [[\"local_write\"], [\"local_write\", \"remote_write\"]]\nsize = [16]\n",
        );
        let v = load(&t).unwrap();
        assert_eq!(
            names(&v),
            [
                "MR write [op=write, access=local_write, size=16]",
                "MR write [op=write, access=local_write+remote_write, size=16]",
                "MR read [op=read, access=local_write, size=16]",
                "MR read [op=read, access=local_write+remote_write, size=16]",
            ]
        );
        // Whole values keep their type: an array of flags, a number.
        assert_eq!(v[0].mrs[1].access, crate::vocab::Access::LOCAL_WRITE);
        assert_eq!(v[1].mrs[1].access.0 & 2, 2);
        assert_eq!(v[0].mrs[1].size, 16);
        assert_eq!(v[2].case.as_deref(), Some("op=read, access=local_write, size=16"));
        assert!(v.iter().all(|s| s.spec == ["mr.access.remote-write-denied"]));
        assert!(v[0].warnings.is_empty(), "{:?}", v[0].warnings);
    }

    #[test]
    fn explicit_cases_with_names_and_spec_and_the_product_inside() {
        let t = file(
            "\"${access}\"",
            "\"write\"",
            "[cases]\nsize = [8, 16]\n\
             [[case]]\nname = \"denied\"\naccess = [\"local_write\"]\nop = \"w\"\nspec = [\"mr.access.remote-read-denied\"]\n\
             [[case]]\naccess = { x = 1 }\nop = \"w\"\n",
        );
        let v = load(&t);
        // The second case's access is a table, which `access` is not: said at the
        // placeholder, for that case alone.
        let e = v.unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].message
                .contains("(in cases `access=x:1, op=w, size=8`, `access=x:1, op=w, size=16`)"),
            "{}",
            e[0]
        );
        let access_line = t.lines().position(|l| l.starts_with("access = ")).unwrap() + 1;
        assert_eq!((e[0].line, e[0].col), (access_line, 10), "{}", e[0]);
        let t = t.replace("access = { x = 1 }", "access = [\"local_write\", \"remote_write\"]");
        let v = load(&t).unwrap();
        assert_eq!(
            names(&v),
            [
                "MR w [denied, size=8]",
                "MR w [denied, size=16]",
                "MR w [access=local_write+remote_write, op=w, size=8]",
                "MR w [access=local_write+remote_write, op=w, size=16]",
            ]
        );
        assert_eq!(v[0].spec, ["mr.access.remote-write-denied", "mr.access.remote-read-denied"]);
        assert_eq!(v[2].spec, ["mr.access.remote-write-denied"]);
        assert_eq!(v[1].mrs[1].size, 16);
    }

    #[test]
    fn placeholders_in_strings_and_the_literal_escape() {
        let t = file("[\"local_write\"]", "\"${op}\"", "[cases]\nop = [\"write\"]\nsize = [16]\n")
            .replace("name = \"MR ${op}\"", "name = 'MR ${op} and $${op} \"quoted\"'");
        let v = load(&t).unwrap();
        assert_eq!(names(&v), ["MR write and ${op} \"quoted\" [op=write, size=16]"]);
        // Without cases, a file is as it was; `$${` is still a literal `${` (in
        // format 3: in a file of an older format, `${` is text; see `legacy`).
        let plain = file("[\"local_write\"]", "\"write\"", "").replace("\"${size}\"", "16");
        let plain = format!("format = 3\n{plain}");
        let plain = plain.replace("name = \"MR ${op}\"", "name = \"plain $${x}\"");
        let v = load(&plain).unwrap();
        assert_eq!(names(&v), ["plain ${x}"]);
        assert_eq!(v[0].case, None);
        // A placeholder without [cases]: said, with what to do.
        let e = load(&plain.replace("$${x}", "${x}")).unwrap_err();
        assert!(e[0].message.contains("unknown parameter `x`"), "{}", e[0]);
        assert!(e[0].hint.as_deref().unwrap_or("").contains("no"), "{:?}", e[0].hint);
        // `${` that is no placeholder.
        let e = load(&plain.replace("$${x}", "${ x")).unwrap_err();
        assert!(e[0].message.contains("starts a placeholder"), "{}", e[0]);
    }

    #[test]
    fn an_unknown_placeholder_is_pointed_at_with_the_closest_name() {
        let t = file(
            "\"${acess}\"",
            "\"${op}\"",
            "[cases]\nop = [\"write\"]\naccess = [[\"local_write\"]]\nsize = [16]\n",
        );
        let e = load(&t).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].message, "unknown parameter `acess` in a placeholder");
        assert_eq!(e[0].hint.as_deref(), Some("did you mean `access`?"));
        let line = t.lines().position(|l| l.starts_with("access = ")).unwrap() + 1;
        assert_eq!((e[0].line, e[0].col), (line, 11));
        assert!(e[0].to_string().contains("^^^^^^^^"), "{}", e[0]);
    }

    #[test]
    fn an_unused_parameter_warns_once() {
        let t = file(
            "[\"local_write\"]",
            "\"${op}\"",
            "[cases]\nop = [\"write\", \"read\"]\nsize = [16]\nmtu = [256, 512]\n",
        );
        let v = load(&t).unwrap();
        assert_eq!(v.len(), 4);
        assert_eq!(v[0].warnings.len(), 1, "{:?}", v[0].warnings);
        let w = &v[0].warnings[0];
        assert_eq!(w.severity, Severity::Warning);
        assert!(w.message.contains("parameter `mtu` is used by no placeholder"), "{w}");
        assert!(v[1..].iter().all(|s| s.warnings.is_empty()));
    }

    #[test]
    fn limits_and_shapes_refused() {
        let base = file("[\"local_write\"]", "\"${op}\"", "");
        let e = load(&format!("{base}[cases]\nop = []\nsize = [16]\n")).unwrap_err();
        assert!(e[0].message.contains("lists no values"), "{}", e[0]);
        let e = load(&format!("{base}[cases]\nop = \"write\"\nsize = [16]\n")).unwrap_err();
        assert!(e[0].message.contains("not a list"), "{}", e[0]);
        let many: Vec<String> = (0..65).map(|i| i.to_string()).collect();
        let e = load(&format!(
            "{base}[cases]\nop = [{}]\nsize = [{}]\n",
            many.join(","),
            many.join(",")
        ))
        .unwrap_err();
        assert!(e[0].message.contains("4225 cases; at most 4096"), "{}", e[0]);
        assert!(e[0].hint.as_deref().unwrap_or("").contains("[[case]]"));
        let e =
            load(&format!("{base}[[case]]\nop = \"write\"\nsize = 16\n[[case]]\nop = \"read\"\n"))
                .unwrap_err();
        assert!(e[0].message.contains("case 2 gives no `size`"), "{}", e[0]);
        let e = load(&format!(
            "{base}[[case]]\nop = \"write\"\nsize = 16\n[[case]]\nop = \"write\"\nsize = 16\n"
        ))
        .unwrap_err();
        assert!(e[0].message.contains("two cases are named"), "{}", e[0]);
        let e = load(&format!(
            "{base}[cases]\nop = [\"write\"]\nsize = [16]\n[[case]]\nop = \"read\"\n"
        ))
        .unwrap_err();
        assert!(e[0].message.contains("`op` is a parameter of [cases] too"), "{}", e[0]);
    }

    #[test]
    fn spans_map_back_to_the_file() {
        // "ab${x}cd" → "abXXXXXcd": the file's "${x}" (2..6) became 2..7.
        let m = SpanMap { edits: vec![(2..6, 2..7)] };
        assert_eq!(m.to_file(0..2), 0..2);
        assert_eq!(m.to_file(3..4), 2..6, "inside the value: the placeholder");
        assert_eq!(m.to_file(7..9), 6..8);
        assert_eq!(m.to_file(0..9), 0..8);
        assert_eq!(m.to_text(7), 8);
        assert_eq!(inline(&Value::Float(1.0)), "1.0");
        let t: toml::Table = toml::from_str("a = { b = [1, 'x\"y'], 'c d' = true }").unwrap();
        assert_eq!(inline(&t["a"]), "{ b = [1, \"x\\\"y\"], \"c d\" = true }");
        assert_eq!(text_of(&t["a"]), "b:1+x\"y+c d:true");
    }
}
