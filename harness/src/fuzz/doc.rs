//! A batch's scenario file, built as a `toml_edit` document: the blocks every
//! batch of a kind has are fixtures (scenario fragments in `fuzz/fixtures/`, each
//! loaded with `include_str!` by the module that uses it), merged in whole or in
//! part; the tables a batch draws (probes, fault rules, expectations) are built as
//! `toml_edit` tables and appended; the file is laid out in the order the
//! scenario runs them. Every key and string is quoted by `toml_edit`, and every
//! comment is made one line.
//!
//! Owns: [`Doc`], [`int`] and [`hex`] (drawn numbers as TOML integers). Imports:
//! `toml_edit`.
use toml_edit::{ArrayOfTables, DocumentMut, Item, Key, Table, Value};

/// A scenario being written: the document, and the place its next table takes.
pub(super) struct Doc {
    doc: DocumentMut,
    /// The position (in the file) of the next table put in.
    next: usize,
}

/// How long after its steps may have ended a batch's operation may complete:
/// every QP a batch posts on gives up within 70 ms (ACK timeout 16.8 ms, 3
/// retries; `fixtures/requester-setup.toml`, `fixtures/liveness-objects.toml`),
/// and a probe's `settle_ms`, counted in full, is itself tens of ms more than
/// its quiet gap takes.
const COMPLETION_MARGIN_MS: u64 = 500;

/// A table of a fixture, as its header says: `[a.b]` or `[[a.b]]`.
enum Header {
    Table(Table),
    Array(Table),
}

impl Doc {
    /// An empty scenario whose file opens with `header`, a comment line each.
    pub(super) fn new<S: AsRef<str>>(header: impl IntoIterator<Item = S>) -> Doc {
        let mut doc = DocumentMut::new();
        doc.decor_mut().set_prefix(comment(header));
        Doc { doc, next: 1 }
    }

    /// `key = value` at the top, after the keys set before.
    pub(super) fn set(&mut self, key: &str, value: impl Into<Value>) {
        self.doc.insert(key, Item::Value(value.into()));
    }

    /// Fixture `text` whole: its top-level keys after the document's, then its
    /// tables, in its order, after every table the document has.
    pub(super) fn fixture(&mut self, text: &str) {
        self.merge(text, None);
    }

    /// Only the tables of fixture `text` under its top-level key `top` (`step`,
    /// `expect`), in its order, after every table the document has: a fixture
    /// holding an operation's step and its expectations gives each its place.
    pub(super) fn fixture_part(&mut self, text: &str, top: &str) {
        self.merge(text, Some(top));
    }

    /// Table `t` as the next of array `path` (`["step"]`, `["expect", "probe"]`),
    /// after every table the document has; `why`: a comment line above it.
    pub(super) fn push(&mut self, path: &[&str], mut t: Table, why: Option<&str>) {
        if let Some(why) = why {
            t.decor_mut().set_prefix(format!("\n{}", comment([why])));
        }
        let path: Vec<Key> = path.iter().map(|k| Key::new(*k)).collect();
        self.place(&path, Header::Array(t));
    }

    /// Gives every completion the batch waits for by name (`wr_id`, `index`) a
    /// `within_ms`: the longest its steps may take ([`step_ms`]) and
    /// [`COMPLETION_MARGIN_MS`] more. The run stops waiting for an operation that
    /// never completes then, not 3 s after the steps: the sighting is the same,
    /// sooner (`completions_wanted` in the controller).
    pub(super) fn bound_completions(&mut self) {
        let steps = self.doc.get("step").and_then(Item::as_array_of_tables);
        let ms = COMPLETION_MARGIN_MS + steps.map_or(0, |s| s.iter().map(step_ms).sum::<u64>());
        let Some(expect) = self.doc.get_mut("expect").and_then(Item::as_table_mut) else {
            return;
        };
        let Some(wcs) = expect.get_mut("completion").and_then(Item::as_array_of_tables_mut) else {
            return;
        };
        for t in wcs.iter_mut() {
            let named = t.contains_key("wr_id") || t.contains_key("index");
            if named && !t.contains_key("count") && !t.contains_key("within_ms") {
                t.insert("within_ms", toml_edit::value(int(ms)));
            }
        }
    }

    fn merge(&mut self, text: &str, top: Option<&str>) {
        let fixture: DocumentMut = text
            .parse()
            .unwrap_or_else(|e| panic!("a fuzz fixture is not TOML (a fuzzer bug): {e}"));
        let root = fixture.as_table();
        if top.is_none() {
            for (k, item) in root.iter().filter(|(_, item)| is_value(item)) {
                // An array two fixtures both set (`requires`) holds what either
                // says, once.
                if let (Some(had), Some(more)) =
                    (self.doc.get_mut(k).and_then(Item::as_array_mut), item.as_array())
                {
                    for v in more.iter() {
                        if !had.iter().any(|h| h.to_string().trim() == v.to_string().trim()) {
                            had.push(v.clone());
                        }
                    }
                    continue;
                }
                // The key as the fixture has it: with the comment above it.
                let key = root.key(k).cloned().unwrap_or_else(|| Key::new(k));
                self.doc.insert_formatted(&key, item.clone());
            }
        }
        let mut headers = Vec::new();
        collect(root, &mut Vec::new(), &mut headers);
        headers.retain(|(_, path, _)| top.is_none_or(|top| path[0].get() == top));
        headers.sort_by_key(|(position, _, _)| *position);
        for (i, (_, path, mut header)) in headers.into_iter().enumerate() {
            if i == 0 {
                // A blank line before the fixture, its comment included.
                let (Header::Table(t) | Header::Array(t)) = &mut header;
                let decor = t.decor_mut();
                if let Some(p) = decor.prefix().and_then(|p| p.as_str()) {
                    if !p.starts_with('\n') {
                        let p = format!("\n{p}");
                        decor.set_prefix(p);
                    }
                }
            }
            self.place(&path, header);
        }
    }

    /// Puts `header` at `path`, the tables above it made (without a header of
    /// their own) where the document has none.
    fn place(&mut self, path: &[Key], header: Header) {
        let Some((last, parents)) = path.split_last() else { return };
        let mut at = self.doc.as_table_mut();
        for k in parents {
            let item = at.entry_format(k).or_insert_with(|| {
                let mut t = Table::new();
                t.set_implicit(true);
                Item::Table(t)
            });
            at = item.as_table_mut().unwrap_or_else(|| {
                panic!("`{}` is a table in one fuzz fixture and not in another", k.get())
            });
        }
        match header {
            Header::Table(mut t) => {
                t.set_position(self.next);
                at.insert_formatted(last, Item::Table(t));
            }
            Header::Array(mut t) => {
                t.set_position(self.next);
                let array = at
                    .entry_format(last)
                    .or_insert_with(|| Item::ArrayOfTables(ArrayOfTables::new()));
                array
                    .as_array_of_tables_mut()
                    .unwrap_or_else(|| {
                        panic!("`{}` is an array of tables in one fuzz fixture only", last.get())
                    })
                    .push(t);
            }
        }
        self.next += 1;
    }
}

impl std::fmt::Display for Doc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.doc.fmt(f)
    }
}

/// The longest step `t` may take: a probe its `settle_ms`, a wait its
/// `within_ms` (or the default), a sleep its `ms`, any other step 50 ms (a
/// round trip to an agent under TCG is a few).
fn step_ms(t: &Table) -> u64 {
    use crate::scenario::model::{
        DEFAULT_NOTIFY_MS, DEFAULT_SETTLE_MS, DEFAULT_WAIT_COMPLETIONS_MS,
    };
    let num = |v: Option<&Item>| v.and_then(Item::as_integer).map(|n| n.max(0) as u64);
    let settle = t
        .get("probe")
        .and_then(Item::as_inline_table)
        .and_then(|p| p.get("settle_ms"))
        .and_then(Value::as_integer)
        .map(|n| n.max(0) as u64);
    match t.get("op").and_then(Item::as_str).unwrap_or("") {
        "probe" => settle.unwrap_or(DEFAULT_SETTLE_MS),
        "sleep" => num(t.get("ms")).unwrap_or(0),
        "wait_completions" => num(t.get("within_ms")).unwrap_or(DEFAULT_WAIT_COMPLETIONS_MS),
        "await_notify" => num(t.get("within_ms")).unwrap_or(DEFAULT_NOTIFY_MS),
        _ => 50,
    }
}

/// A key's item that is a value of its table (`a.b = 1` included), not a table
/// with a header of its own.
fn is_value(item: &Item) -> bool {
    item.is_value() || item.as_table().is_some_and(Table::is_dotted)
}

/// The tables of `t` (at `path`) with a header, each with its position in the
/// fixture: a `[table]` with its values only (the tables under it are collected
/// on their own); an `[[array]]`'s tables whole (a fixture nests no table in one).
fn collect(t: &Table, path: &mut Vec<Key>, out: &mut Vec<(usize, Vec<Key>, Header)>) {
    for (k, item) in t.iter() {
        path.push(Key::new(k));
        match item {
            Item::Table(sub) if !sub.is_dotted() => {
                if !sub.is_implicit() {
                    let mut values = sub.clone();
                    values.retain(|_, item| is_value(item));
                    out.push((sub.position().unwrap_or(0), path.clone(), Header::Table(values)));
                }
                collect(sub, path, out);
            }
            Item::ArrayOfTables(array) => {
                for sub in array.iter() {
                    let at = sub.position().unwrap_or(0);
                    out.push((at, path.clone(), Header::Array(sub.clone())));
                }
            }
            _ => {}
        }
        path.pop();
    }
}

/// `lines` as comment lines: a line break or other control character in one
/// becomes a space (TOML allows none in a comment but the tab).
fn comment<S: AsRef<str>>(lines: impl IntoIterator<Item = S>) -> String {
    let mut out = String::new();
    for line in lines {
        let line: String = line
            .as_ref()
            .chars()
            .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
            .collect();
        let line = format!("# {line}");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `n` as a TOML integer. Every number the fuzzer draws is below 2^63 (TOML's
/// integers are signed); a larger one would be written as the largest.
pub(super) fn int(n: impl Into<u64>) -> Value {
    Value::from(i64::try_from(n.into()).unwrap_or(i64::MAX))
}

/// `n` as a hexadecimal TOML integer of at least `digits` digits (`0x8123`), as
/// `toml_edit` reads that literal; [`int`] where it cannot.
pub(super) fn hex(n: impl Into<u64>, digits: usize) -> Value {
    let n = n.into();
    format!("{n:#0width$x}", width = digits + 2).parse::<Value>().unwrap_or_else(|_| int(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every fixture is TOML, as both parsers the project uses read it, and a
    /// fragment of a scenario: no top-level table but the ones a scenario has.
    #[test]
    fn every_fixture_parses_as_toml() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/fuzz/fixtures");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).expect("the fixtures") {
            let path = entry.expect("a fixture").path();
            assert_eq!(path.extension().and_then(|e| e.to_str()), Some("toml"), "{path:?}");
            let text = std::fs::read_to_string(&path).expect("readable");
            let doc: DocumentMut =
                text.parse().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            text.parse::<toml::Table>().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for (k, _) in doc.iter() {
                let known = [
                    "format",
                    "timeout_ms",
                    "completion_grace_ms",
                    "requires",
                    "endpoints",
                    "qp",
                    "mr",
                    "mw",
                    "step",
                    "expect",
                    "fault",
                ];
                assert!(known.contains(&k), "{}: `{k}`", path.display());
            }
            seen += 1;
        }
        assert!(seen >= 17, "{seen} fixtures in {}", dir.display());
    }

    /// Fixtures and drawn tables go in in the order they are given, each array
    /// in order; keys, strings and comments are toml_edit's, a comment on one line.
    #[test]
    fn tables_go_in_in_order_and_strings_are_quoted() {
        let mut d = Doc::new(["a \"title\"\nwith a second line", "second"]);
        d.set("name", "a \"quoted\" \\ name\nover two lines");
        d.fixture("format = 3\n\n[endpoints.a]\n[endpoints.b]\n\n[[step]]\nop = \"one\"\n");
        let mut t = Table::new();
        t.insert("op", toml_edit::value("two \"2\""));
        d.push(&["step"], t, Some("why\nnot"));
        d.fixture("# a comment\n[[step]]\nop = \"three\"\n\n[[expect.memory]]\nmr = \"m\"\n");
        let mut t = Table::new();
        t.insert("probe", toml_edit::value("p0"));
        d.push(&["expect", "probe"], t, None);
        d.fixture_part("[[step]]\nop = \"four\"\n\n[[expect.memory]]\nmr = \"n\"\n", "step");
        let text = d.to_string();
        assert!(text.starts_with("# a \"title\" with a second line\n# second\nname = "), "{text}");
        assert!(text.contains("\n# why not\n[[step]]\n"), "{text}");
        assert!(text.contains("\n\n# a comment\n[[step]]\n"), "{text}");
        let back: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back["name"].as_str(), Some("a \"quoted\" \\ name\nover two lines"));
        let steps: Vec<&str> = back["step"]
            .as_array()
            .map(|a| a.iter().filter_map(|s| s["op"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(steps, ["one", "two \"2\"", "three", "four"]);
        assert_eq!(back["expect"]["memory"].as_array().map(Vec::len), Some(1), "{text}");
        assert_eq!(back["expect"]["probe"][0]["probe"].as_str(), Some("p0"));
        assert!(back["endpoints"]["a"].is_table() && back["endpoints"]["b"].is_table());
        // The tables come in the file in that order too.
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s}: {text}"));
        assert!(at("[endpoints.a]") < at("\"one\"") && at("\"one\"") < at("two \"2\""));
        assert!(at("two \"2\"") < at("\"three\"") && at("\"three\"") < at("[[expect.memory]]"));
        assert!(at("[[expect.probe]]") < at("\"four\""));
    }

    /// Every completion waited for by name gets the steps' longest time and the
    /// margin; one with a `count`, or its own `within_ms`, keeps what it says.
    #[test]
    fn awaited_completions_are_bounded_by_the_steps() {
        let mut d = Doc::new(["t"]);
        d.fixture(
            r#"
[[step]]
op = "probe"
probe = { id = "p0", settle_ms = 50, quiet_ms = 10 }
[[step]]
op = "probe"
probe = { id = "p1" }
[[step]]
op = "wait_completions"
count = 1
[[step]]
op = "sleep"
ms = 7
[[step]]
op = "write"
[[expect.completion]]
wr_id = 1
[[expect.completion]]
index = 0
[[expect.completion]]
count = 2
[[expect.completion]]
wr_id = 3
within_ms = 9
"#,
        );
        d.bound_completions();
        let back: toml::Table = toml::from_str(&d.to_string()).expect("TOML");
        let within: Vec<Option<i64>> = back["expect"]["completion"]
            .as_array()
            .expect("completions")
            .iter()
            .map(|c| c.get("within_ms").and_then(toml::Value::as_integer))
            .collect();
        use crate::scenario::model::{DEFAULT_SETTLE_MS, DEFAULT_WAIT_COMPLETIONS_MS};
        let steps = 50 + DEFAULT_SETTLE_MS + DEFAULT_WAIT_COMPLETIONS_MS + 7 + 50;
        let ms = (COMPLETION_MARGIN_MS + steps) as i64;
        assert_eq!(within, [Some(ms), Some(ms), None, Some(9)]);
    }

    #[test]
    fn numbers_are_toml_integers() {
        assert_eq!(hex(0x8123u16, 4).to_string(), "0x8123");
        assert_eq!(hex(0x12u16, 4).to_string(), "0x0012");
        assert_eq!(hex(0x80_1234u32, 1).to_string(), "0x801234");
        assert_eq!(hex(0x8000_0000u32, 1).as_integer(), Some(0x8000_0000));
        assert_eq!(int(50u32).to_string(), "50");
        assert_eq!(int(u64::MAX).as_integer(), Some(i64::MAX));
    }
}
