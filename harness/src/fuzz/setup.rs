//! Setup minimisation: the tables of a finding's scenario it does not need.
//!
//! Once ddmin has chosen a finding's probes (or a requester batch's rules and
//! operations) and undone their needless changes, the finding still carries its
//! batch's whole setup: every QP, MR and window of its kind of batch, the
//! receives, the liveness WRITE, every oracle's expectations. Here each of the
//! scenario's tables (every `[[qp]]`, `[[mr]]`, `[[mw]]`, `[[srq]]`, `[[step]]`,
//! `[[fault]]` and `[[expect.*]]`) is an item of a second ddmin. A set of tables
//! is tried with the objects its tables name (a step on QP `uc` keeps
//! `[[qp]] uc`, a SEND from MR `msg` keeps `[[mr]] msg`) and with the tables the
//! finding is about, which are never left out; a set the scenario checker
//! refuses does not show the finding, and is not run. Last, each `requires`
//! entry the checker does not ask for once the windows or SRQs are gone goes too.
//!
//! Owns: [`Setup`]. Imports: `toml_edit`, the scenario checker (as the judge of
//! what a set of tables still needs).
use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result};
use toml_edit::{DocumentMut, Item, Table, Value};

/// The kinds of named object a table may name, each by the key that names it
/// (`qp = "uc"`, `sge = [{ mr = "msg" }]`, `invalidate = { mw = "w2" }`) and
/// defined by the array of its own name (`[[qp]] name = "uc"`).
const OBJECTS: [&str; 4] = ["qp", "mr", "mw", "srq"];

/// The steps that set the state of the object they name by that key: a table
/// that keeps an object keeps these steps on it too, so the object is tried in
/// the state the batch gave it (a probe at a QP moved to the error state is a
/// probe at a QP in ERR, never at one in RTS).
const STATE_STEPS: [(&str, &str); 6] = [
    ("modify_qp", "qp"),
    ("bind_mw", "mw"),
    ("local_inv", "mw"),
    ("dealloc_mw", "mw"),
    ("rereg_mr", "mr"),
    ("dereg_mr", "mr"),
];

/// A finding's scenario, as the tables a setup minimisation chooses from.
pub(crate) struct Setup {
    doc: DocumentMut,
    units: Vec<Unit>,
}

/// One table of the scenario.
#[derive(Debug)]
struct Unit {
    /// Where its array is: `["qp"]`, `["expect", "memory"]`.
    path: Vec<String>,
    /// The object it defines: (`qp`, `uc`).
    defines: Option<(String, String)>,
    /// The objects it names.
    names: BTreeSet<(String, String)>,
    /// A step that sets the state of an object (of [`STATE_STEPS`]): which.
    sets: Option<(String, String)>,
    /// What the finding is about: never left out.
    kept: bool,
    /// `step post_recv`, `QP uc`: in the file's header.
    label: String,
}

impl Setup {
    /// The tables of scenario `text`; `about(path, table)` says which the
    /// finding is about (`path`: `step`, `expect.probe`).
    pub(crate) fn new(text: &str, about: impl Fn(&str, &Table) -> bool) -> Result<Setup> {
        let doc: DocumentMut =
            text.parse().context("the fuzzer wrote a finding that is not TOML (a fuzzer bug)")?;
        let mut units = Vec::new();
        let mut arrays: Vec<Vec<String>> = Vec::new();
        for (k, item) in doc.as_table().iter() {
            match item {
                Item::ArrayOfTables(_) => arrays.push(vec![k.to_string()]),
                Item::Table(t) if k == "expect" => {
                    for (sub, item) in t.iter() {
                        if item.is_array_of_tables() {
                            arrays.push(vec![k.to_string(), sub.to_string()]);
                        }
                    }
                }
                _ => {}
            }
        }
        for path in arrays {
            let Some(array) = lookup(&doc, &path) else { continue };
            let joined = path.join(".");
            for t in array.iter() {
                let str_of = |k: &str| t.get(k).and_then(Item::as_str);
                let defines = (path.len() == 1 && OBJECTS.contains(&path[0].as_str()))
                    .then(|| str_of("name").map(|n| (path[0].clone(), n.to_string())))
                    .flatten();
                let sets = STATE_STEPS
                    .iter()
                    .filter(|_| joined == "step")
                    .find(|(op, _)| str_of("op") == Some(op))
                    .and_then(|(_, key)| str_of(key).map(|n| (key.to_string(), n.to_string())));
                let mut names = BTreeSet::new();
                named_in_table(t, &mut names);
                let label = match (&defines, str_of("op")) {
                    (Some((kind, name)), _) => format!("{} {name}", object_word(kind)),
                    (None, Some(op)) => format!("step {op}"),
                    (None, None) if path[0] == "expect" => format!("{} expectation", path[1]),
                    (None, None) => joined.clone(),
                };
                units.push(Unit {
                    kept: about(&joined, t),
                    path: path.clone(),
                    defines,
                    names,
                    sets,
                    label,
                });
            }
        }
        Ok(Setup { doc, units })
    }

    /// The tables a minimisation may leave out, by index.
    pub(crate) fn candidates(&self) -> Vec<usize> {
        (0..self.units.len()).filter(|&i| !self.units[i].kept).collect()
    }

    /// The tables in the scenario with `keep` (of [`Setup::candidates`]): those,
    /// the ones the finding is about, every object they name and the steps
    /// that set those objects' state.
    fn closure(&self, keep: &[usize]) -> BTreeSet<usize> {
        let mut kept: BTreeSet<usize> =
            (0..self.units.len()).filter(|&i| self.units[i].kept || keep.contains(&i)).collect();
        loop {
            let named: BTreeSet<&(String, String)> =
                kept.iter().flat_map(|&i| &self.units[i].names).collect();
            let more: Vec<usize> = (0..self.units.len())
                .filter(|i| !kept.contains(i))
                .filter(|&i| {
                    let u = &self.units[i];
                    [&u.defines, &u.sets].into_iter().flatten().any(|d| named.contains(d))
                })
                .collect();
            if more.is_empty() {
                return kept;
            }
            kept.extend(more);
        }
    }

    /// The scenario with the tables `keep` (of [`Setup::candidates`]) and their
    /// [`Setup::closure`].
    pub(crate) fn text(&self, keep: &[usize]) -> String {
        let kept = self.closure(keep);
        let mut doc = self.doc.clone();
        let mut paths: Vec<&Vec<String>> = self.units.iter().map(|u| &u.path).collect();
        paths.dedup();
        for path in paths {
            let stays: Vec<bool> = (0..self.units.len())
                .filter(|&i| &self.units[i].path == path)
                .map(|i| kept.contains(&i))
                .collect();
            let (parent, last) = match path.split_last() {
                Some((last, parents)) => (parents, last),
                None => continue,
            };
            let Some(at) = table_mut(&mut doc, parent) else { continue };
            let empty = match at.get_mut(last).and_then(Item::as_array_of_tables_mut) {
                Some(array) => {
                    let mut i = 0;
                    array.retain(|_| {
                        i += 1;
                        stays.get(i - 1).copied().unwrap_or(true)
                    });
                    array.is_empty()
                }
                None => false,
            };
            if empty {
                at.remove(last);
            }
        }
        // A comment above a top-level key (`format`) describes the batch's whole
        // setup; with some of it left out, it would describe what is not there.
        // (Not the first key's: the file's header is above it.)
        if kept.len() < self.units.len() {
            let keys: Vec<String> = doc
                .as_table()
                .iter()
                .skip(1)
                .filter(|(_, item)| item.is_value())
                .map(|(k, _)| k.to_string())
                .collect();
            for k in keys {
                if let Some(mut key) = doc.as_table_mut().key_mut(&k) {
                    key.leaf_decor_mut().set_prefix("");
                }
            }
        }
        if doc.get("expect").and_then(Item::as_table).is_some_and(Table::is_empty) {
            doc.remove("expect");
        }
        doc.to_string()
    }

    /// What `keep` leaves out, in words: `QPs ud, rc_err; MRs locked, rbuf; 4
    /// steps (post_recv ×3, modify_qp); 6 expectations`.
    pub(crate) fn left_out(&self, keep: &[usize]) -> String {
        let kept = self.closure(keep);
        let out: Vec<&Unit> =
            (0..self.units.len()).filter(|i| !kept.contains(i)).map(|i| &self.units[i]).collect();
        let mut parts = Vec::new();
        for kind in OBJECTS {
            let names: Vec<&str> = out
                .iter()
                .filter_map(|u| u.defines.as_ref())
                .filter(|(k, _)| k == kind)
                .map(|(_, n)| n.as_str())
                .collect();
            if !names.is_empty() {
                let word = object_word(kind);
                let s = if names.len() == 1 { "" } else { "s" };
                parts.push(format!("{word}{s} {}", names.join(", ")));
            }
        }
        let others: Vec<&str> =
            out.iter().filter(|u| u.defines.is_none()).map(|u| u.label.as_str()).collect();
        let mut counted: Vec<(&str, usize)> = Vec::new();
        for l in others {
            match counted.iter_mut().find(|(x, _)| *x == l) {
                Some((_, n)) => *n += 1,
                None => counted.push((l, 1)),
            }
        }
        parts.extend(counted.into_iter().map(|(l, n)| match n {
            1 => l.to_string(),
            n => format!("{l} ×{n}"),
        }));
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join("; ")
        }
    }
}

/// The scenario `text` without each `requires` entry it checks without (the
/// windows or SRQs that needed it left out with the setup); `file` names it in
/// the checker's messages.
pub(crate) fn without_needless_requires(file: &Path, text: &str) -> String {
    let checks = |t: &str| crate::scenario::check::parse_str(file, t).is_ok();
    let Ok(mut doc) = text.parse::<DocumentMut>() else { return text.to_string() };
    let mut i = 0;
    while doc.get("requires").and_then(Item::as_array).is_some_and(|list| i < list.len()) {
        let mut tried = doc.clone();
        if let Some(list) = tried.get_mut("requires").and_then(Item::as_array_mut) {
            list.remove(i);
        }
        if checks(&tried.to_string()) {
            doc = tried;
        } else {
            i += 1;
        }
    }
    if doc.get("requires").and_then(Item::as_array).is_some_and(toml_edit::Array::is_empty) {
        doc.remove("requires");
    }
    doc.to_string()
}

fn table_mut<'d>(doc: &'d mut DocumentMut, path: &[String]) -> Option<&'d mut Table> {
    let mut at = doc.as_table_mut();
    for p in path {
        at = at.get_mut(p)?.as_table_mut()?;
    }
    Some(at)
}

fn lookup<'d>(doc: &'d DocumentMut, path: &[String]) -> Option<&'d toml_edit::ArrayOfTables> {
    let (last, parents) = path.split_last()?;
    let mut at = doc.as_table();
    for p in parents {
        at = at.get(p)?.as_table()?;
    }
    at.get(last)?.as_array_of_tables()
}

fn object_word(kind: &str) -> &'static str {
    match kind {
        "qp" => "QP",
        "mr" => "MR",
        "mw" => "window",
        _ => "SRQ",
    }
}

/// The objects table `t` names, at any depth.
fn named_in_table(t: &Table, out: &mut BTreeSet<(String, String)>) {
    for (k, item) in t.iter() {
        match item {
            Item::Value(v) => named_in_value(k, v, out),
            Item::Table(t) => named_in_table(t, out),
            Item::ArrayOfTables(a) => a.iter().for_each(|t| named_in_table(t, out)),
            Item::None => {}
        }
    }
}

fn named_in_value(key: &str, v: &Value, out: &mut BTreeSet<(String, String)>) {
    match v {
        Value::String(s) if OBJECTS.contains(&key) => {
            out.insert((key.to_string(), s.value().clone()));
        }
        Value::InlineTable(t) => t.iter().for_each(|(k, v)| named_in_value(k, v, out)),
        Value::Array(a) => a.iter().for_each(|v| named_in_value(key, v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::minimise::ddmin;

    const SCENARIO: &str = r#"# A batch.
name = "b"
# Every batch's QPs uc and rc, MRs target and rbuf.
format = 3
requires = ["mw_type2"]

[endpoints.a]
[endpoints.b]

[[qp]]
name = "rc"
type = "rc"
between = ["b", "a"]

[[qp]]
name = "uc"
type = "uc"
between = ["b", "a"]

[[mr]]
name = "target"
on = "b"
size = 64
access = ["local_write", "remote_write", "mw_bind"]

[[mr]]
name = "rbuf"
on = "b"
size = 64
access = ["local_write"]

[[mr]]
name = "src"
on = "a"
size = 8

[[mw]]
name = "w2"
on = "b"
type = 2

[[step]]
on = "b"
op = "post_recv"
qp = "uc"
wr_id = 1
sge = [{ mr = "rbuf" }]

[[step]]
on = "b"
op = "modify_qp"
qp = "uc"
state = "err"

# The one that matters.
[[step]]
on = "a"
op = "write"
qp = "rc"
wr_id = 5
sge = [{ mr = "src" }]
remote = { mr = "target" }

[[expect.completion]]
on = "a"
wr_id = 5
status = "IBV_WC_SUCCESS"

[[expect.memory]]
on = "b"
mr = "rbuf"
unchanged = true
"#;

    fn setup() -> Setup {
        Setup::new(SCENARIO, |path, t| {
            path == "step" && t.get("wr_id").and_then(Item::as_integer) == Some(5)
        })
        .expect("TOML")
    }

    /// Left with none of the rest, the finding's step keeps the QP and MRs it
    /// names, nothing else; the file still checks.
    #[test]
    fn the_step_a_finding_is_about_keeps_what_it_names() {
        let s = setup();
        let text = s.text(&[]);
        let sc = crate::scenario::check::parse_str(Path::new("f.toml"), &text)
            .unwrap_or_else(|e| panic!("{e:?}\n{text}"));
        let qps: Vec<&str> = sc.qps.iter().map(|q| q.name.as_str()).collect();
        let mut mrs: Vec<&str> = sc.mrs.iter().map(|m| m.name.as_str()).collect();
        mrs.sort();
        assert_eq!(qps, ["rc"]);
        assert_eq!(mrs, ["src", "target"]);
        assert!(sc.mws.is_empty());
        assert_eq!(sc.steps.len(), 1);
        assert_eq!(sc.expect.len(), 0);
        assert!(text.contains("# The one that matters."), "{text}");
        assert!(text.starts_with("# A batch.\n"), "the header stays: {text}");
        assert!(!text.contains("Every batch's"), "what describes the whole goes: {text}");
        assert!(s.text(&s.candidates()).contains("Every batch's"), "all of it: it stays");
        assert_eq!(
            s.left_out(&[]),
            "QP uc; MR rbuf; window w2; step post_recv; step modify_qp; completion expectation; memory expectation"
        );
        // The window went, so `requires` may go too: the checker no longer asks.
        let pruned = without_needless_requires(Path::new("f.toml"), &text);
        assert!(!pruned.contains("requires"), "{pruned}");
        // With the window, it stays.
        let all = s.text(&s.candidates());
        assert_eq!(without_needless_requires(Path::new("f.toml"), &all), all);
    }

    /// A kept receive keeps its QP, in the state the batch gave it, and its MR;
    /// the expectation about MR `rbuf` keeps `rbuf`.
    #[test]
    fn a_kept_table_keeps_the_objects_it_names() {
        let s = setup();
        let find = |label: &str| {
            s.candidates().into_iter().find(|&i| s.units[i].label == label).expect(label)
        };
        let text = s.text(&[find("step post_recv")]);
        assert!(text.contains("name = \"uc\"") && text.contains("name = \"rbuf\""), "{text}");
        assert!(text.contains("state = \"err\""), "{text}");
        assert!(!text.contains("name = \"w2\""), "{text}");
        let text = s.text(&[find("memory expectation")]);
        assert!(text.contains("name = \"rbuf\"") && !text.contains("name = \"uc\""), "{text}");
    }

    /// ddmin over the tables finds the set a finding needs: here it shows
    /// only while b's receive on `uc` is there.
    #[test]
    fn ddmin_over_the_tables_finds_the_setup_a_finding_needs() {
        let s = setup();
        let mut runs = 0;
        let keep = ddmin(s.candidates(), 30, |k| {
            runs += 1;
            s.text(k).contains("op = \"post_recv\"")
        });
        let text = s.text(&keep);
        assert!(text.contains("op = \"post_recv\"") && text.contains("op = \"write\""));
        assert_eq!(s.left_out(&keep), "window w2; completion expectation; memory expectation");
        assert!(runs <= 12, "{runs} runs");
    }
}
