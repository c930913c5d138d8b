//! Scenario files of an older format: what each format dropped or changed, read
//! the way the file's own format meant it, with a warning that names the change;
//! and the same file written in the current format (`roce check --fix`).
//!
//! A file says its format with `format = N` at the top level; a file without it
//! is format 1. Each format after the first is a change that made a valid file
//! invalid or changed what it means (docs/format-changes.md lists them all, with
//! the commits):
//!
//! - format 2: a step's keys are those of its `op`. Format 1 accepted every step
//!   key on every step and read only those its op uses; what it accepted without
//!   reading ([`dropped`]) is, in a format 1 file, left out with a warning.
//! - format 3: `${` in a string starts a placeholder of a parameterised scenario
//!   and `$${` is a literal `${`. In a file of format 1 or 2 that has no `[cases]`
//!   or `[[case]]` (which came with format 3), strings are read as written.
//!
//! Keys added by a later format are accepted in a file of any format: only what
//! was dropped or changed is read by the file's format.
//!
//! Reading leaves every byte where it was: a dropped key is blanked with spaces
//! ([`Legacy::text`]), so every span the check reports is the file's own.
//! Fixing ([`fix`]) deletes what reading blanks, keeping every comment and line
//! that is not the dropped key's, writes a literal `${` as `$${`, and sets
//! `format` to [`CURRENT`].
//!
//! Owns: the format versions and their history as rules. Imports: [`super::diag`],
//! [`super::cases`] (the plain case and a string literal's text); `toml_edit`.
use std::borrow::Cow;
use std::ops::Range;

use toml_edit::{ImDocument, Item, Key, Value};

use super::cases;
use super::diag::{Diagnostic, Severity, Source};

/// The format this `roce` writes, and the newest it reads.
pub(crate) const CURRENT: u32 = 3;
/// The format in which a step's keys became those of its `op`.
const STEPS_BY_OP: u32 = 2;
/// The format in which `${` in a string became a placeholder.
const PLACEHOLDERS: u32 = 3;

/// Every key a format 1 step had (its `op` aside).
const FORMAT1_STEP_KEYS: [&str; 15] = [
    "on",
    "qp",
    "wr_id",
    "sge",
    "remote",
    "flags",
    "imm_data",
    "compare",
    "swap",
    "add",
    "to",
    "ms",
    "count",
    "within_ms",
    "probe",
];

/// Why `key` on a format 1 step of `op` was accepted and never read, when it
/// was; `None` for a key the step reads today, a key format 1 refused on that
/// step too, and an op format 1 did not have.
pub(crate) fn dropped(op: &str, key: &str) -> Option<&'static str> {
    if !FORMAT1_STEP_KEYS.contains(&key) {
        return None;
    }
    match op {
        "sync" => Some(
            "a `sync` is the controller's own: it waits for the steps before it to be posted, and format 1 read none of its keys",
        ),
        "sleep" => (key != "ms").then_some(
            "a `sleep` pauses the whole scenario in the controller, between the steps before and after it, whatever endpoint it names; format 1 read only its `ms`",
        ),
        "wait_completions" => (!matches!(key, "on" | "count" | "within_ms")).then_some(
            "a `wait_completions` waits for `count` more completions on `on`'s queue; format 1 read nothing else of it",
        ),
        // Format 1 refused `sge`, `remote` and `imm_data` on a probe step.
        "probe" => (!matches!(key, "on" | "qp" | "probe" | "sge" | "remote" | "imm_data")).then_some(
            "a probe is a crafted packet, not a work request: format 1 read only its `on`, `qp` and `probe` (what the packet holds goes inside `probe = { … }`)",
        ),
        _ => work_request(op, key),
    }
}

/// [`dropped`] for the steps that post a work request.
fn work_request(op: &str, key: &str) -> Option<&'static str> {
    const POST: [&str; 5] = ["on", "qp", "wr_id", "sge", "flags"];
    let own: &[&str] = match op {
        "post_recv" => &["flags"],
        "send" => &["to"],
        "send_imm" => &["to", "imm_data"],
        "write" | "read" => &["remote"],
        "write_imm" => &["remote", "imm_data"],
        "cmp_swap" => &["remote", "compare", "swap"],
        "fetch_add" => &["remote", "add"],
        _ => return None,
    };
    if op == "post_recv" && key == "flags" {
        return Some(
            "a receive has no send flags: format 1 checked their names and posted the receive without them",
        );
    }
    if POST.contains(&key) || own.contains(&key) {
        return None;
    }
    match key {
        // Refused by format 1 too: `remote` where there is no remote address, a
        // probe on a step that is not one.
        "remote" | "probe" => None,
        "imm_data" => Some(
            "format 1 put it in a work request whose opcode carries no immediate data, where the verbs ignore it; `send_imm` and `write_imm` send one",
        ),
        "compare" | "swap" => Some("format 1 read `compare` and `swap` of a `cmp_swap` only"),
        "add" => Some("format 1 read `add` of a `fetch_add` only"),
        "to" => Some(
            "format 1 read `to` on no step (a UD SEND goes to the other end of its QP); since format 2 only a `send` or `send_imm` may say it",
        ),
        "ms" => Some("only a `sleep` pauses, and format 1 read `ms` of a `sleep` only"),
        "count" => Some(
            "only a `wait_completions` waits for completions, and format 1 read `count` of it only",
        ),
        "within_ms" => Some(
            "format 1 added it to how long the controller waited for the step to be answered, and a work request is answered once it is posted; only a `wait_completions` waits",
        ),
        _ => None,
    }
}

/// One change [`fix`] makes.
#[derive(Debug, Clone)]
enum Edit {
    /// A dropped key of a `[[step]]` table (with its line, when it is alone on
    /// it), or of an inline step table, or a comma that went with one.
    Remove { range: Range<usize> },
    /// A string literal whose `${` is literal: written anew.
    Replace { range: Range<usize>, with: String },
}

impl Edit {
    fn range(&self) -> &Range<usize> {
        match self {
            Edit::Remove { range } | Edit::Replace { range, .. } => range,
        }
    }
}

/// A file read by its own format.
#[derive(Debug)]
pub(crate) struct Legacy<'t> {
    /// The format the file says it is in (1 when it says none).
    pub(crate) format: u32,
    /// The text to check: the file's, with every dropped key blanked out.
    pub(crate) text: Cow<'t, str>,
    /// Whether `${` in a string is a placeholder (format 3 on, or a file with
    /// `[cases]` or `[[case]]`).
    pub(crate) placeholders: bool,
    /// What the file's format allows and the current one reads otherwise.
    pub(crate) warnings: Vec<Diagnostic>,
    /// What the file's format does not allow, though an older one did.
    pub(crate) errors: Vec<Diagnostic>,
    edits: Vec<Edit>,
    /// Where `format`'s value is; else, where a `format = N` line goes.
    format_at: Result<Range<usize>, usize>,
}

impl Legacy<'_> {
    /// Whether the file is in the current form already: nothing to fix.
    pub(crate) fn is_current(&self) -> bool {
        self.format == CURRENT && self.edits.is_empty()
    }
}

/// Reads the file's format and what in it that format reads otherwise than the
/// current one; an error for a `format` that is none this `roce` knows. `src` is
/// TOML (its syntax was checked).
pub(crate) fn read<'t>(src: &Source<'t>) -> Result<Legacy<'t>, Vec<Diagnostic>> {
    read_in(src, 1)
}

/// [`read`], for a file that says no `format` read in format `default`: a
/// fixture, which is in the format of the scenario that uses it unless it says.
pub(crate) fn read_in<'t>(src: &Source<'t>, default: u32) -> Result<Legacy<'t>, Vec<Diagnostic>> {
    let text = src.text;
    let doc = ImDocument::parse(text).map_err(|e| {
        vec![src.diag(e.span(), format!("TOML syntax: {}", e.message().trim()), None)]
    })?;
    let root = doc.as_table();
    let (format, format_at) = match root.get_key_value("format") {
        None => (default, Err(first_line(text, root))),
        Some((_, item)) => {
            let span = item.span();
            match item.as_integer() {
                Some(n) if (1..=i64::from(CURRENT)).contains(&n) => {
                    (n as u32, Ok(span.unwrap_or(0..0)))
                }
                Some(n) if n > i64::from(CURRENT) => {
                    return Err(vec![src.diag(
                        span,
                        format!("format {n} is newer than this roce reads (formats 1 to {CURRENT})"),
                        Some("a newer roce wrote it: upgrade roce (docs/format-changes.md lists each format)".into()),
                    )])
                }
                Some(n) => {
                    return Err(vec![src.diag(
                        span,
                        format!("there is no format {n}: formats are numbered from 1"),
                        Some(format!("`format = {CURRENT}` is the current one; a file without `format` is format 1")),
                    )])
                }
                None => {
                    return Err(vec![src.diag(
                        span,
                        "`format` is a whole number: the version of the scenario format the file is written in",
                        Some(format!("`format = {CURRENT}` is the current one (docs/format-changes.md)")),
                    )])
                }
            }
        }
    };
    let mut l = Legacy {
        format,
        text: Cow::Borrowed(text),
        placeholders: format >= PLACEHOLDERS
            || root.contains_key("cases")
            || root.contains_key("case"),
        warnings: Vec::new(),
        errors: Vec::new(),
        edits: Vec::new(),
        format_at,
    };
    let mut blank: Vec<Range<usize>> = Vec::new();
    for step in steps(root) {
        step_keys(src, &step, &mut l, &mut blank);
    }
    if !l.placeholders {
        let mut lits = Vec::new();
        root.iter().for_each(|(_, item)| strings(item, &mut lits));
        for (range, value) in lits {
            if blank.iter().any(|b| b.start <= range.start && range.end <= b.end) {
                continue;
            }
            let mut d = src.diag(
                Some(range.clone()),
                format!(
                    "`${{` in a string: literal text in format {}, which this file is in; since format {PLACEHOLDERS} it starts a placeholder of a parameterised scenario",
                    l.format
                ),
                Some("`roce check --fix` writes it `$${`, a literal `${` in the current format".into()),
            );
            d.severity = Severity::Warning;
            l.warnings.push(d);
            let raw = &text[range.clone()];
            let with = if raw.matches("${").count() == value.matches("${").count() {
                raw.replace("${", "$${")
            } else {
                cases::inline(&toml::Value::String(value.replace("${", "$${")))
            };
            l.edits.push(Edit::Replace { range, with });
        }
    }
    if !blank.is_empty() {
        l.text = Cow::Owned(blanked(text, &blank));
    }
    Ok(l)
}

/// `text` with the bytes of `ranges` made spaces, its line breaks kept: every
/// span after them stays where it was. Only whole characters are blanked (keys,
/// values, headers, commas), so the bytes stay UTF-8; should they not, the text
/// is returned as it was and serde says what it finds.
pub(crate) fn blanked(text: &str, ranges: &[Range<usize>]) -> String {
    let mut t = text.as_bytes().to_vec();
    for r in ranges {
        for b in t.get_mut(r.clone()).into_iter().flatten() {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    String::from_utf8(t).unwrap_or_else(|_| text.to_string())
}

/// Where a `format = N` line goes in a file without one: the start of the line
/// of the first top-level key (the file's opening comments stay above it).
fn first_line(text: &str, root: &toml_edit::Table) -> usize {
    root.iter()
        .filter_map(|(k, item)| match item {
            Item::Value(_) => root.key(k).and_then(Key::span).map(|s| s.start),
            _ => None,
        })
        .min()
        .map_or(0, |at| line_start(text, at))
}

fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// A step table, with the leaves of its keys: `(top key, where the key/value
/// starts, where the value ends)`, in the order they are written.
struct Step<'d> {
    op: Option<&'d str>,
    leaves: Vec<(String, usize, usize)>,
    /// An inline table (`step = [{ … }]`), not a `[[step]]` table.
    inline: bool,
}

fn steps<'d>(root: &'d toml_edit::Table) -> Vec<Step<'d>> {
    let mut out = Vec::new();
    match root.get("step") {
        Some(Item::ArrayOfTables(a)) => {
            for t in a.iter() {
                let mut leaves = Vec::new();
                for (k, item) in t.iter() {
                    let start = t.key(k).and_then(Key::span).map(|s| s.start);
                    item_leaves(k, start, item, &mut leaves);
                }
                let op = t.get("op").and_then(Item::as_str);
                out.push(Step { op, leaves, inline: false });
            }
        }
        Some(Item::Value(Value::Array(a))) => {
            for v in a.iter() {
                let Value::InlineTable(t) = v else { continue };
                let mut leaves = Vec::new();
                for (k, v) in t.iter() {
                    let start = t.key(k).and_then(Key::span).map(|s| s.start);
                    value_leaves(k, start, v, &mut leaves);
                }
                let op = t.get("op").and_then(Value::as_str);
                out.push(Step { op, leaves, inline: true });
            }
        }
        _ => {}
    }
    for s in &mut out {
        s.leaves.sort_by_key(|l| l.1);
    }
    out
}

/// The key/values an item of a step is written as: one, or one per leaf of a
/// dotted key (`remote.mr = …`, `remote.offset = …`).
fn item_leaves(top: &str, key: Option<usize>, item: &Item, out: &mut Vec<(String, usize, usize)>) {
    match item {
        Item::Value(v) => value_leaves(top, key, v, out),
        Item::Table(t) if t.is_dotted() => {
            for (k, x) in t.iter() {
                item_leaves(top, t.key(k).and_then(Key::span).map(|s| s.start), x, out);
            }
        }
        _ => {}
    }
}

fn value_leaves(top: &str, key: Option<usize>, v: &Value, out: &mut Vec<(String, usize, usize)>) {
    match v {
        Value::InlineTable(t) if t.is_dotted() => {
            for (k, x) in t.iter() {
                value_leaves(top, t.key(k).and_then(Key::span).map(|s| s.start), x, out);
            }
        }
        _ => {
            if let (Some(k), Some(s)) = (key, v.span()) {
                out.push((top.to_string(), k, s.end));
            }
        }
    }
}

/// Where the key/value whose (last) key starts at `key` starts: back over a
/// dotted key's segments before it, on its line.
fn kv_start(text: &str, key: usize) -> usize {
    let b = text.as_bytes();
    let mut i = key;
    while i > 0
        && matches!(b[i - 1], b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'"' | b'\'' | b' ' | b'\t')
    {
        i -= 1;
    }
    while i < key && matches!(b[i], b' ' | b'\t') {
        i += 1;
    }
    i
}

/// The dropped keys of one step: warned about (or refused, in a file of a format
/// that no longer has them), blanked for reading, removed by [`fix`].
fn step_keys(src: &Source, step: &Step, l: &mut Legacy, blank: &mut Vec<Range<usize>>) {
    let text = src.text;
    let Some(op) = step.op else { return };
    let gone: Vec<bool> = step.leaves.iter().map(|(k, _, _)| dropped(op, k).is_some()).collect();
    if !gone.contains(&true) {
        return;
    }
    let mut said: Vec<&str> = Vec::new();
    for ((k, key, end), _) in step.leaves.iter().zip(&gone).filter(|(_, g)| **g) {
        let start = kv_start(text, *key);
        if said.contains(&k.as_str()) {
            continue;
        }
        said.push(k);
        let why = dropped(op, k).unwrap_or_default();
        if l.format < STEPS_BY_OP {
            let mut d = src.diag(
                Some(start..*end),
                format!("`{k}` of a `{op}` step: ignored since format {STEPS_BY_OP} ({why})"),
                Some(format!(
                    "format 1 accepted it here and did nothing with it; `roce check --fix` removes it and writes `format = {CURRENT}`"
                )),
            );
            d.severity = Severity::Warning;
            l.warnings.push(d);
        } else {
            l.errors.push(src.diag(
                Some(start..*end),
                format!(
                    "`{k}` of a `{op}` step: dropped in format {STEPS_BY_OP}, and this file says `format = {}` ({why})",
                    l.format
                ),
                Some("remove it (`roce check --fix` does)".into()),
            ));
        }
    }
    match step.inline {
        false => {
            for ((_, key, end), _) in step.leaves.iter().zip(&gone).filter(|(_, g)| **g) {
                let start = kv_start(text, *key);
                blank.push(start..*end);
                l.edits.push(Edit::Remove { range: whole_lines(text, start, *end) });
            }
        }
        true => {
            // An inline table: a comma stays between each two entries kept, and
            // goes with what is dropped everywhere else. Reading blanks what
            // fixing deletes.
            let entries: Vec<(Range<usize>, bool)> = step
                .leaves
                .iter()
                .zip(&gone)
                .map(|((_, key, end), g)| (kv_start(text, *key)..*end, *g))
                .collect();
            let mut kept_before = false;
            for (i, (r, g)) in entries.iter().enumerate() {
                let mut cut = Vec::new();
                if *g {
                    cut.push(r.clone());
                }
                kept_before |= !g;
                if let Some((n, next_gone)) = entries.get(i + 1) {
                    if *next_gone || !kept_before {
                        cut.push(comma(text, &(r.end..n.start)));
                    }
                }
                for c in cut.into_iter().filter(|c| !c.is_empty()) {
                    blank.push(c.clone());
                    l.edits.push(Edit::Remove { range: c });
                }
            }
        }
    }
}

/// The comma in `sep` (the text between two entries of an inline table), with
/// the spaces after it; empty at its start when there is none.
fn comma(text: &str, sep: &Range<usize>) -> Range<usize> {
    match text[sep.clone()].find(',') {
        Some(i) => {
            let at = sep.start + i;
            let spaces = text[at + 1..sep.end].len() - text[at + 1..sep.end].trim_start().len();
            at..at + 1 + spaces
        }
        None => sep.start..sep.start,
    }
}

/// The range a dropped `[[step]]` key/value takes when fixed: its whole line
/// (with a comment after it, which was about it) when it is alone on it.
fn whole_lines(text: &str, start: usize, end: usize) -> Range<usize> {
    let ls = line_start(text, start);
    let le = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
    let after = text[end..le].trim();
    if text[ls..start].trim().is_empty() && (after.is_empty() || after.starts_with('#')) {
        ls..le
    } else {
        start..end
    }
}

/// Every string value holding `${` (keys aside), with its span.
fn strings(item: &Item, out: &mut Vec<(Range<usize>, String)>) {
    match item {
        Item::Value(v) => value_strings(v, out),
        Item::Table(t) => t.iter().for_each(|(_, x)| strings(x, out)),
        Item::ArrayOfTables(a) => {
            a.iter().flat_map(|t| t.iter()).for_each(|(_, x)| strings(x, out))
        }
        Item::None => {}
    }
}

fn value_strings(v: &Value, out: &mut Vec<(Range<usize>, String)>) {
    match v {
        Value::String(s) if s.value().contains("${") => {
            if let Some(span) = s.span() {
                out.push((span, s.value().clone()));
            }
        }
        Value::Array(a) => a.iter().for_each(|x| value_strings(x, out)),
        Value::InlineTable(t) => t.iter().for_each(|(_, x)| value_strings(x, out)),
        _ => {}
    }
}

/// The file in the current format: every dropped key removed, every literal
/// `${` written `$${`, `format = CURRENT`. Comments and layout are kept, but for
/// a dropped key's own line.
pub(crate) fn fix(text: &str, l: &Legacy) -> String {
    let mut edits: Vec<Edit> = l.edits.clone();
    match &l.format_at {
        Ok(value) => edits.push(Edit::Replace { range: value.clone(), with: CURRENT.to_string() }),
        Err(at) => {
            edits.push(Edit::Replace { range: *at..*at, with: format!("format = {CURRENT}\n") })
        }
    }
    edits.sort_by_key(|e| (e.range().start, e.range().end));
    let mut out = String::with_capacity(text.len() + 16);
    let mut at = 0;
    for e in &edits {
        let r = e.range();
        if r.start < at {
            // Inside what an edit before already removed.
            continue;
        }
        out.push_str(&text[at..r.start]);
        if let Edit::Replace { with, .. } = e {
            out.push_str(with);
        }
        at = r.end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests;
